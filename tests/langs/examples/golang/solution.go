package main

import "fmt"

func solution(a int64, b int64) int64 {
	fmt.Println("adding", a, "and", b)
	return a + b
}
