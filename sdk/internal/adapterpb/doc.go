// Package adapterv1 holds the generated Go code for the plugin contract
// between the verifierd daemon and an adapter subprocess
// (proto/verifierd/adapter/v1/adapter.proto). It is internal to the SDK: the
// daemon reaches an adapter only through sdk/unstable/host's client, and adapter
// authors use the sdk package, which keeps these types out of its API. Do
// not edit the .pb.go files: change the .proto and run scripts/generate.sh.
package adapterv1
