//go:build !linux

package main

import "os"

// mapCase is not used off Linux: the case is read into memory.
func mapCase(*os.File, int64) (string, bool) { return "", false }
