//go:build !linux && !darwin && !freebsd && !netbsd && !openbsd && !dragonfly

package plugin

import (
	"errors"
	"os"
)

// redirectStdout is not implemented here; adapters must keep stdout quiet.
func redirectStdout() (orig *os.File, pipe *os.File, err error) {
	return nil, nil, errors.New("not supported on this platform")
}
