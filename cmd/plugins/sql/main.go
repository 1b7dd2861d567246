// Command verifier-adapter-sql serves the first-party sql adapter
// (adapters/sql) as a verifierd plugin. Build it under that name:
//
//	go build -o .cache/bin/verifier-adapter-sql ./cmd/plugins/sql
package main

import (
	"github.com/verifierd/verifierd/adapters/sql"
	"github.com/verifierd/verifierd/sdk/plugin"
)

func main() { plugin.Main(sql.New) }
