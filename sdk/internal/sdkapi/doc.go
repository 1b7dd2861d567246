// Package sdkapi defines the plain Go types of the adapter SDK: the Adapter
// interface and what goes in and out of it. Package sdk re-exports every
// name here; adapter authors and the daemon use those names.
//
// The types live here, below sdk, only so that the protobuf converters
// (sdk/internal/toproto, sdk/internal/fromproto) and the plugin transport
// (sdk/plugin) can use them while sdk itself imports the transport for Serve.
package sdkapi
