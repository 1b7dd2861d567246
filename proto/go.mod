// The public API's generated Go code (verifierd/verifier/v1: messages and
// gRPC stubs, no grpc-gateway code, which the daemon's module generates
// into internal/httpapi/gw) as a module of its own, so that the client
// module requires it without the daemon's dependencies. The folder is buf's
// module too (buf.yaml); buf reads only the .proto files.
module github.com/verifierd/verifierd/proto

go 1.26.8

require (
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	golang.org/x/net v0.61.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261019180522-ce908d29299b // indirect
)
