//go:build wasip1

package glovebox

// The canonical ABI of the glovebox:tool world, by hand (as guest/c/glovebox.h does it in C):
// the `call` export, cabi_realloc for what the host writes into this module's memory, and the
// host imports. Memory the host writes through cabi_realloc is kept reachable in `held` until
// the Go side has copied it; what `call` returns is held until cabi_post_call.

import (
	"unsafe"
)

var held = map[uintptr][]byte{}

//go:wasmexport cabi_realloc
func cabiRealloc(old uint32, oldSize uint32, align uint32, newSize uint32) uint32 {
	if newSize == 0 {
		return align
	}
	buf := make([]byte, newSize+align)
	ptr := uintptr(unsafe.Pointer(&buf[0]))
	ptr = (ptr + uintptr(align) - 1) &^ (uintptr(align) - 1)
	if old != 0 {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(ptr)), newSize), unsafe.Slice((*byte)(unsafe.Pointer(uintptr(old))), oldSize))
		delete(held, uintptr(old))
	}
	held[ptr] = buf
	return uint32(ptr)
}

// take copies the host-written bytes at ptr and lets them go.
func take(ptr, length uint32) []byte {
	if length == 0 {
		return nil
	}
	out := make([]byte, length)
	copy(out, unsafe.Slice((*byte)(unsafe.Pointer(uintptr(ptr))), length))
	delete(held, uintptr(ptr))
	return out
}

var ret [3]uint32   // call's return area: tag, pointer, length
var retBody []byte  // what ret points at, until cabi_post_call

//go:wasmexport call
func call(ptr, length uint32) uint32 {
	input := string(take(ptr, length))
	output, failed := dispatch(input)
	retBody = []byte(output)
	ret[0] = 0
	if failed {
		ret[0] = 1
	}
	ret[1], ret[2] = 0, uint32(len(retBody))
	if len(retBody) > 0 {
		ret[1] = uint32(uintptr(unsafe.Pointer(&retBody[0])))
	}
	return uint32(uintptr(unsafe.Pointer(&ret[0])))
}

//go:wasmexport cabi_post_call
func cabiPostCall(uint32) {
	retBody = nil
}

//go:wasmimport glovebox:tool/host@0.1.0 log
func hostLog(level uint32, ptr unsafe.Pointer, length uint32)

//go:wasmimport glovebox:tool/host@0.1.0 http-fetch
func hostHTTPFetch(
	methodPtr unsafe.Pointer, methodLen uint32, urlPtr unsafe.Pointer, urlLen uint32,
	headersPtr unsafe.Pointer, headersLen uint32, hasBody uint32, bodyPtr unsafe.Pointer, bodyLen uint32,
	ret unsafe.Pointer,
)

func stringPtr(s string) unsafe.Pointer {
	return unsafe.Pointer(unsafe.StringData(s))
}

func bytesPtr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

// adapterArena is where the WASI preview-1 adapter keeps its state and stack. The adapter
// allocates them on the first WASI call, which Go's runtime makes while it initializes, before
// any Go function can be called; and memory the adapter would grow for itself, Go's allocator
// would hand out again (it counts the pages it grew, not the memory's size). So `glovebox build`
// gives the module a `cabi_realloc_adapter` that hands out this array (Go never touches it),
// after asking glovebox_adapter_arena where it is.
var adapterArena [256 << 10]byte

//go:wasmexport glovebox_adapter_arena
func adapterArenaAddress() uint64 {
	return uint64(uintptr(unsafe.Pointer(&adapterArena[0])))<<32 | uint64(len(adapterArena))
}
