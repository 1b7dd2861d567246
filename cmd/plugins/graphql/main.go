// Command verifier-adapter-graphql serves the first-party graphql adapter
// (adapters/graphql) as a verifierd plugin. Build it under that name:
//
//	go build -o .cache/bin/verifier-adapter-graphql ./cmd/plugins/graphql
package main

import (
	"github.com/verifierd/verifierd/adapters/graphql"
	"github.com/verifierd/verifierd/sdk/plugin"
)

func main() { plugin.Main(graphql.New) }
