// Command verifier-adapter-document-hash serves the first-party
// document-hash adapter (adapters/documenthash) as a verifierd plugin. Build
// it under that name:
//
//	go build -o .cache/bin/verifier-adapter-document-hash ./cmd/plugins/document-hash
package main

import (
	"github.com/verifierd/verifierd/adapters/documenthash"
	"github.com/verifierd/verifierd/sdk/plugin"
)

func main() { plugin.Main(documenthash.New) }
