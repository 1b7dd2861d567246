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

// hugeMemory is the judge's arena for one case (judge.Options.Arena):
// anonymous memory advised into huge pages, so that a large case's compact
// records fault in a few 2 MiB pages rather than thousands of 4 KiB ones.
// It is never unmapped: the process judges one case and exits.
func hugeMemory(size int) []byte {
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
	if err != nil {
		return nil
	}
	_ = syscall.Madvise(mem, syscall.MADV_HUGEPAGE) // a hint: without it, 4 KiB pages
	return mem
}

// judgeArena is where a large case's compact records live.
var judgeArena = hugeMemory
