//go:build unix

package uireadback

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// terminateWait bounds the browser's stop on SIGTERM; the daemon kills a
// plugin that does not end soon after it.
const terminateWait = 10 * time.Second

// CloseOnTerminate makes a SIGTERM of the plugin process stop the process's
// browser and remove its temporary folder (the Chromium profile, HOME and
// XDG folders) before the process ends, then end it as the signal would
// have. The func it returns stops watching, ends the browser at once and
// removes its folder, for a plugin whose Serve returned: the daemon stopped
// it and kills it 2 s later, which a graceful close may not fit on a
// loaded machine. A plugin
// binary's main:
//
//	func main() {
//		defer uireadback.CloseOnTerminate()()
//		plugin.Main(uireadback.New)
//	}
//
// Without it a SIGTERM ends the process at once: Chromium dies with it, but
// its folder stays until another ui_readback process starts a browser and
// removes the folders of processes that are gone.
func CloseOnTerminate() (closeBrowser func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
		case <-done:
			return
		}
		closed := make(chan struct{})
		go func() {
			processBrowser().Close()
			close(closed)
		}()
		select {
		case <-closed:
		case <-time.After(terminateWait):
		}
		// End as a SIGTERM ends a process that does not handle it.
		signal.Reset(syscall.SIGTERM)
		_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(done)
			processBrowser().kill()
		})
	}
}
