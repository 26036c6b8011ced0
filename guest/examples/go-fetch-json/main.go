// go-fetch-json: fetch a URL and return the JSON it answers, with the status.
package main

import (
	"fmt"

	"glovebox/guest/glovebox"
)

type Input struct {
	URL string `json:"url"`
}

type Output struct {
	Status int `json:"status"`
	JSON   any `json:"json"`
}

func fetchJSON(in Input) (Output, error) {
	resp, err := glovebox.Get(in.URL)
	if err != nil {
		return Output{}, err
	}
	glovebox.Log(glovebox.Info, fmt.Sprintf("%s answered %d", in.URL, resp.Status))
	var out Output
	out.Status = resp.Status
	if err := resp.JSON(&out.JSON); err != nil {
		return Output{}, err
	}
	return out, nil
}

func init() { glovebox.Tool(fetchJSON) }

func main() {}
