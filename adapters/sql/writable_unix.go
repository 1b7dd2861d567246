//go:build unix

package sql

import "golang.org/x/sys/unix"

// writableByProcess asks the kernel whether this process, as its effective
// user and groups, may open path for writing: faccessat(2) with
// AT_EACCESS, the same permission check an open for writing makes
// (ownership, mode, ACLs, root's override, a read-only mount), without
// opening the file or writing a byte. The adapter runs as the daemon's
// user, so the answer is the daemon's. Mode bits alone are not that
// answer: root writes a 0444 file, and another user's 0644 file is not
// writable by the daemon.
func writableByProcess(path string) bool {
	return unix.Faccessat(unix.AT_FDCWD, path, unix.W_OK, unix.AT_EACCESS) == nil
}
