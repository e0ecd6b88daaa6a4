package main

func add(a, b int64) int64 {
	return a + b
}
