// Package sdk is what an adapter author imports to teach verifierd to read a
// new system of record: the Adapter interface and the plain Go types that go
// in and out of it. Define builds an Adapter from its Info and a configure
// function whose settings read (most adapters need nothing else), and
// sdk/plugin's Main (around Serve) turns it into a plugin binary:
//
//	var New = sdk.Define(info, configure)
//
//	func main() { plugin.Main(ledger.New) }
//
// The daemon starts the binary as a hashicorp/go-plugin subprocess over gRPC
// with mutual TLS. One process serves every session: the daemon calls
// Configure once per deployment section (its secrets included, read with
// ConfigureRequest.Secret; no run parameters but a plugin's option_params,
// bound into options; Section and sdk/unstable/deployment give the exact shape),
// and every later call carries the session's run parameters,
// which the adapter binds into that one read (ParamChecker lets the daemon
// check them at Begin without reading). CaptureBefore/CaptureAfter records
// stream in bounded batches. The
// daemon judges; an adapter only reads, truthfully: it reports an unreachable
// system of record as data, returns every record the selector can see
// (duplicates included), and never caches between captures. A record it
// cannot shape as a contract reads it (several values in a field it offers
// as one: SingleValue) fails the read (Unshapeable) rather than dropping
// out of it: a read that cannot see is unusable, never empty.
//
// The package owns the author-facing API only. Main and Serve live in
// sdk/plugin; the qualification kit every adapter must pass and the test
// helpers (Subprocess, InProcess, Request, ReadAll) in sdk/adaptertest; the
// daemon's end of the wire in sdk/unstable/host, which adapter authors do
// not import. Generated protobuf types never appear here, and nothing in
// this module imports the daemon (module github.com/verifierd/verifierd/sdk).
//
// # The compatibility promise
//
// The promise covers package sdk, sdk/plugin, sdk/adaptertest, sdk/param
// and sdk/refusal (the one refusal type, which Configure, CheckParams and
// sdk/param return): their exported API is the committed snapshot
// api/sdk.txt, and a change to it is listed in sdk/CHANGES.md. Everything
// under sdk/unstable/ (host, strict, deployment, jsonnum, jsondepth,
// yamldoc, timestamp) is the daemon's own support code, which the module
// carries because its promised packages need it too: it is not covered by
// the promise, is left out of api/sdk.txt, and may change or go away in
// any release. sdk/internal/ cannot be imported at all.
package sdk
