package pluginhost

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal asks Linux to kill the adapter when the daemon dies,
// so that no adapter outlives it (the SDK's parent watchdog is the second
// line).
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
