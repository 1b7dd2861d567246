// Package plugin is the adapter author's end of the verifierd plugin
// protocol: it serves an Adapter to the daemon that started the binary.
// A plugin binary's whole main is
//
//	func main() { plugin.Main(ledger.New) }
//
// Main runs Serve and exits with a message when the binary was started by
// hand; call Serve directly only to handle that error yourself. Either way
// one process holds many configured instances (one Adapter from the factory
// per Configure), with bounded message sizes, batched record streams, panic
// recovery, a stdout guard (nothing but go-plugin's handshake reaches the
// real stdout) and a watchdog that exits when the daemon dies.
//
// The daemon's end of the same protocol is package host; an adapter's tests
// drive it through package adaptertest.
package plugin
