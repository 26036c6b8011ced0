// Package glovebox writes glovebox tools in Go: JSON in and out, and the host's http and log.
//
// A tool is a main package that registers one function in init (or main) and is built with
// `glovebox build` (GOOS=wasip1, a reactor, the WASI preview-1 adapter):
//
//	package main
//
//	import "glovebox/guest/glovebox"
//
//	type Input struct{ Name string `json:"name"` }
//	type Output struct{ Greeting string `json:"greeting"` }
//
//	func greet(in Input) (Output, error) {
//		glovebox.Log(glovebox.Info, "greeting someone")
//		return Output{Greeting: "Hello, " + in.Name + "!"}, nil
//	}
//
//	func init() { glovebox.Tool(greet) }
//
//	func main() {}
//
// The input is the call's JSON object decoded with encoding/json into the function's
// parameter; the result is encoded the same way. A returned error is a `guest_error` with
// its message; a panic traps (`guest_trap`).
package glovebox

import (
	"encoding/json"
	"fmt"
)

// Level is a log line's level.
type Level uint32

const (
	Debug Level = iota
	Info
	Warn
	Error
)

// Log appends a line to the call's log (the result's meta.logs; bounded by the host).
func Log(level Level, message string) {
	hostLog(uint32(level), stringPtr(message), uint32(len(message)))
}

var handler func(string) (string, error)

// Tool makes fn the tool's `call`: fn's parameter is decoded from the input JSON, its result
// encoded as the output JSON. Call it once, from init or main.
func Tool[I any, O any](fn func(I) (O, error)) {
	handler = func(input string) (string, error) {
		var in I
		if err := json.Unmarshal([]byte(input), &in); err != nil {
			return "", fmt.Errorf("invalid input: %w", err)
		}
		out, err := fn(in)
		if err != nil {
			return "", err
		}
		text, err := json.Marshal(out)
		if err != nil {
			return "", fmt.Errorf("cannot encode the output as JSON: %w", err)
		}
		return string(text), nil
	}
}

func dispatch(input string) (string, bool) {
	if handler == nil {
		return "no tool registered: call glovebox.Tool(fn) from init", true
	}
	output, err := handler(input)
	if err != nil {
		return err.Error(), true
	}
	return output, false
}
