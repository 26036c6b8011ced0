// echo: answers {"text": ...} with the text it was given.
package main

import "glovebox/guest/glovebox"

type Echo struct {
	Text string `json:"text"`
}

func echo(in Echo) (Echo, error) { return in, nil }

func init() { glovebox.Tool(echo) }

func main() {}
