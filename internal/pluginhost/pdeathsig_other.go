//go:build !linux

package pluginhost

import "os/exec"

// setParentDeathSignal has no equivalent here; the SDK's parent watchdog
// stops orphaned adapters.
func setParentDeathSignal(*exec.Cmd) {}
