// Package verifierv1 holds the generated Go code for verifierd's public API,
// VerifierService, used by runtime clients (verifier.proto beside this file).
// Do not edit the .pb.go files: change the .proto and run
// scripts/generate.sh.
package verifierv1
