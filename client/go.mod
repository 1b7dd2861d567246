module github.com/verifierd/verifierd/client

go 1.26.8

require (
	github.com/verifierd/verifierd/proto v0.4.0
	github.com/verifierd/verifierd/receipt v0.4.0
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261019180522-ce908d29299b
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	golang.org/x/net v0.61.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)

// The public API's generated code and the receipt package are modules of
// their own (proto/go.mod, receipt/go.mod). The require above names the
// versions released with this module (make release puts them all in
// dist/goproxy, this go.mod without the replaces); in the repository the
// client always builds against the copies beside it.
replace (
	github.com/verifierd/verifierd/proto => ../proto
	github.com/verifierd/verifierd/receipt => ../receipt
)
