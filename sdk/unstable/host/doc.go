// Package host is the daemon's end of the adapter protocol: it starts an
// adapter binary (go-plugin's handshake, gRPC only, AutoMTLS, an environment
// of exactly what the caller passes) or serves an adapter in process, and
// drives it through Client, which configures instances, passes each call's
// run parameters and receives capture records as a Stream of batches.
//
// An adapter author does not import it: an adapter serves itself with
// package plugin, and its tests use package adaptertest, which drives the
// adapter through this same client so that what the kit qualifies is what
// the daemon runs. It is in the SDK module for that reason, and because the
// daemon serves adapters in process over the SDK's own server.
//
// Every transport failure surfaces as ErrPluginShutdown, and a capture
// stream only ends without an error when it is complete.
//
// Unstable: this package is under sdk/unstable/, the daemon's own support
// code that the SDK module carries because the SDK's packages need it too.
// It is not covered by the SDK's compatibility promise, is left out of the
// API snapshot (api/sdk.txt), and may change or go away in any release;
// adapter authors do not import it.
package host
