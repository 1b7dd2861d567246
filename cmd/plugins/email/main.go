// Command verifier-adapter-email serves the first-party email adapter
// (adapters/email) as a verifierd plugin. Build it under that name, beside
// the verifierd binary:
//
//	go build -o .cache/bin/verifier-adapter-email ./cmd/plugins/email
package main

import (
	"github.com/verifierd/verifierd/adapters/email"
	"github.com/verifierd/verifierd/sdk/plugin"
)

func main() { plugin.Main(email.New) }
