// Command verifier-adapter-file serves the first-party file adapter
// (adapters/file) as a verifierd plugin. Build it under that name, beside
// the verifierd binary:
//
//	go build -o .cache/bin/verifier-adapter-file ./cmd/plugins/file
package main

import (
	"github.com/verifierd/verifierd/adapters/file"
	"github.com/verifierd/verifierd/sdk/plugin"
)

func main() { plugin.Main(file.New) }
