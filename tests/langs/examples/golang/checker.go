// An example checker for kiln's golang workspace: it is built together with check/solution.go
// (both `package main`). For each argument list of check/asserts.json ({"arguments": [[a, b], ...]})
// it calls solution(a, b) and prints the protocol: one JSON array with one item per call,
// {"type":"result","value":...,"time":"0.0000123","output":"<what the call printed>"}, or an
// "error" item when the call panics (the next calls still run).
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
)

type item struct {
	Type   string `json:"type"`
	Value  any    `json:"value"`
	Time   string `json:"time"`
	Output string `json:"output"`
}

// call runs fn with os.Stdout redirected to a pipe, and turns a panic into an "error" item.
func call(fn func() any) (it item) {
	stdout := os.Stdout
	r, w, err := os.Pipe()
	if err != nil {
		panic(err)
	}
	os.Stdout = w
	captured := make(chan string)
	go func() {
		text, _ := io.ReadAll(r)
		captured <- string(text)
	}()
	start := time.Now()
	defer func() {
		elapsed := time.Since(start)
		os.Stdout = stdout
		w.Close()
		it.Output = <-captured
		r.Close()
		it.Time = fmt.Sprintf("%.7f", elapsed.Seconds())
		if failure := recover(); failure != nil {
			it.Type, it.Value = "error", fmt.Sprint(failure)
		}
	}()
	return item{Type: "result", Value: fn()}
}

func main() {
	var asserts struct {
		Arguments [][]int64 `json:"arguments"`
	}
	if data, err := os.ReadFile("check/asserts.json"); err == nil {
		if err := json.Unmarshal(data, &asserts); err != nil {
			fmt.Fprintln(os.Stderr, "check/asserts.json:", err)
			os.Exit(1)
		}
	}
	items := []item{}
	for _, args := range asserts.Arguments {
		a, b := args[0], args[1]
		items = append(items, call(func() any { return solution(a, b) }))
	}
	if err := json.NewEncoder(os.Stdout).Encode(items); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
