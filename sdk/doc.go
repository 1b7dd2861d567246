// Package sdk is what an adapter author imports to teach verifierd to read a
// new system of record: the Adapter interface, the plain Go types that go in
// and out of it, and Serve, which turns an Adapter into a plugin binary.
//
// A plugin main is two lines:
//
//	func main() { sdk.Serve(func() sdk.Adapter { return ledger.New() }) }
//
// The daemon starts the binary as a hashicorp/go-plugin subprocess over gRPC
// with mutual TLS, calls Configure with the deployment's section and secrets,
// and streams CaptureBefore/CaptureAfter records in bounded batches. The
// daemon judges; an adapter only reads, truthfully: it reports an unreachable
// system of record as data, returns every record the selector can see
// (duplicates included), and never caches between captures.
//
// The package owns the author-facing API only. The wire transport lives in
// sdk/plugin (which the daemon also uses as the client), the qualification
// kit every adapter must pass in sdk/adaptertest. Generated protobuf types
// never appear here, and nothing here imports the daemon.
package sdk
