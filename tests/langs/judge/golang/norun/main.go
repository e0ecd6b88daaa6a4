package adder

// A library package: `go build` writes an archive of it, not a program.
func Add(a, b int64) int64 { return a + b }
