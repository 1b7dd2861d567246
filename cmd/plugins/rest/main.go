// Command verifier-adapter-rest serves the first-party rest adapter
// (adapters/rest) as a verifierd plugin. Build it under that name:
//
//	go build -o .cache/bin/verifier-adapter-rest ./cmd/plugins/rest
package main

import (
	"github.com/verifierd/verifierd/adapters/rest"
	"github.com/verifierd/verifierd/sdk/plugin"
)

func main() { plugin.Main(rest.New) }
