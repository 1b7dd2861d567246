//go:build !unix

package uireadback

// CloseOnTerminate returns a func that closes the process's browser and
// removes its temporary folder; without Unix signals there is no SIGTERM
// to watch.
func CloseOnTerminate() (closeBrowser func()) {
	return func() { processBrowser().Close() }
}
