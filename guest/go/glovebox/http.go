//go:build wasip1

package glovebox

import (
	"encoding/json"
	"fmt"
	"runtime"
	"unsafe"
)

// Response is an HTTP response: the status, the headers as (name, value) pairs, the body.
type Response struct {
	Status  int
	Headers [][2]string
	Body    []byte
}

// JSON decodes the body into v.
func (r *Response) JSON(v any) error {
	if err := json.Unmarshal(r.Body, v); err != nil {
		return fmt.Errorf("response is not the JSON expected: %w", err)
	}
	return nil
}

// HTTPError is why a request produced no response: Kind is denied, timeout, too-large or network.
type HTTPError struct {
	Kind   string
	Reason string
}

func (e *HTTPError) Error() string { return "http " + e.Kind + ": " + e.Reason }

var httpErrorKinds = [...]string{"denied", "timeout", "too-large", "network"}

// Fetch sends method url with headers and body (nil: none) through the host's http-fetch: the
// call's HTTP grant (allowlist, deadline, secrets) applies; what it does not allow is "denied".
func Fetch(method, url string, headers [][2]string, body []byte) (*Response, error) {
	flat := make([]uint32, 0, 4*len(headers))
	for _, h := range headers {
		flat = append(flat, uint32(uintptr(stringPtr(h[0]))), uint32(len(h[0])), uint32(uintptr(stringPtr(h[1]))), uint32(len(h[1])))
	}
	var hasBody uint32
	if body != nil {
		hasBody = 1
	}
	var area [6]uint32
	var flatPtr unsafe.Pointer
	if len(flat) > 0 {
		flatPtr = unsafe.Pointer(&flat[0])
	}
	hostHTTPFetch(stringPtr(method), uint32(len(method)), stringPtr(url), uint32(len(url)),
		flatPtr, uint32(len(headers)), hasBody, bytesPtr(body), uint32(len(body)), unsafe.Pointer(&area[0]))
	runtime.KeepAlive(method)
	runtime.KeepAlive(url)
	runtime.KeepAlive(headers)
	runtime.KeepAlive(flat)
	runtime.KeepAlive(body)
	if area[0]&0xff != 0 {
		kind := area[1] & 0xff
		reason := string(take(area[2], area[3]))
		if int(kind) >= len(httpErrorKinds) {
			return nil, &HTTPError{Kind: "network", Reason: reason}
		}
		return nil, &HTTPError{Kind: httpErrorKinds[kind], Reason: reason}
	}
	resp := &Response{Status: int(area[1] & 0xffff)}
	count := area[3]
	if count > 0 {
		pairs := unsafe.Slice((*uint32)(unsafe.Pointer(uintptr(area[2]))), 4*count)
		for i := uint32(0); i < count; i++ {
			name := string(take(pairs[4*i], pairs[4*i+1]))
			value := string(take(pairs[4*i+2], pairs[4*i+3]))
			resp.Headers = append(resp.Headers, [2]string{name, value})
		}
		take(area[2], 16*count)
	}
	resp.Body = take(area[4], area[5])
	return resp, nil
}

// Get sends GET url.
func Get(url string) (*Response, error) {
	return Fetch("GET", url, nil, nil)
}
