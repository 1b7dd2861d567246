// Package plugin is the wire transport between the verifierd daemon and an
// adapter, on both ends of hashicorp/go-plugin's gRPC connection.
//
// Adapter side: Serve and Main (a plugin binary's main), and the
// AdapterService server: one process holds many configured instances (one
// Adapter from the factory per Configure), with bounded message sizes,
// batched record streams, panic recovery, the stdout guard and the
// parent-death watchdog.
// A plugin main is:
//
//	func main() { plugin.Main(ledger.New) }
//
// Daemon side: AdapterPlugin for go-plugin's plugin map, ClientConfig and
// Start for a subprocess adapter (handshake, AutoMTLS, empty environment),
// and Client, which configures instances, passes each call's run
// parameters, and receives capture records as a stream of batches. Every
// transport failure surfaces as ErrPluginShutdown, and a capture stream only
// ends without an error when it is complete.
//
// InProcess runs an adapter behind the same client and server in one
// process, for fast tests of first-party adapters.
//
// The package speaks protobuf internally; its exported API uses the sdk
// types only.
package plugin
