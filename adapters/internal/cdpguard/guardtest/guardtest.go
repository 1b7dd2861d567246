// Package guardtest holds what the read-back adapters' guard stress tests
// share (TestRefusedRequestsNeverArrive in onscreen and uireadback).
package guardtest

import (
	"os"
	"strconv"
	"testing"
)

// ReadsEnv sets how many reads a guard stress test makes: make test runs a
// few dozen, VERIFIERD_GUARD_READS=300 the full count.
const ReadsEnv = "VERIFIERD_GUARD_READS"

// Reads is the number of reads to make: ReadsEnv's when set, else normal.
func Reads(t *testing.T, normal int) int {
	t.Helper()
	v := os.Getenv(ReadsEnv)
	if v == "" {
		return normal
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number of reads", ReadsEnv, v)
	}
	return n
}
