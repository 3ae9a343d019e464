//go:build !linux

package main

// threadCPU is not available here: the goroutine rows leave the CPU columns out.
func threadCPU() int64 { return -1 }
