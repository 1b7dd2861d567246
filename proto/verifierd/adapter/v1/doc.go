// Package adapterv1 holds the generated Go code for the plugin contract
// between the verifierd daemon and an adapter subprocess (adapter.proto
// beside this file). Do not edit the .pb.go files: change the .proto and run
// scripts/generate.sh. Adapter authors use the sdk package instead, which
// keeps these types out of its API.
package adapterv1
