// Command verifier-adapter-document serves the first-party document
// adapter (adapters/document) as a verifierd plugin. Build it under that
// name, beside the verifierd binary:
//
//	go build -o .cache/bin/verifier-adapter-document ./cmd/plugins/document
package main

import (
	"github.com/verifierd/verifierd/adapters/document"
	"github.com/verifierd/verifierd/sdk/plugin"
)

func main() { plugin.Main(document.New) }
