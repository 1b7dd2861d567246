package main

import (
	"os"
	"syscall"
	"unsafe"
)

// mapCase maps a regular case file read-only and returns its bytes as a
// string with no copy: the fast decoder keeps spans of it, and a mapping
// the process never writes is as immutable as a Go string. The mapping
// lives until the process exits (verifyctl judge is one case per process).
// ok is false when the file cannot be mapped; the caller then reads it.
func mapCase(f *os.File, size int64) (string, bool) {
	if size <= 0 || size > maxCaseBytes {
		return "", false
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_PRIVATE|syscall.MAP_POPULATE)
	if err != nil {
		return "", false
	}
	return unsafe.String(unsafe.SliceData(data), len(data)), true
}
