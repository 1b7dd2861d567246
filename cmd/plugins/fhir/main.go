// Command verifier-adapter-fhir serves the first-party fhir adapter
// (adapters/fhir) as a verifierd plugin. Build it under that name:
//
//	go build -o .cache/bin/verifier-adapter-fhir ./cmd/plugins/fhir
package main

import (
	"github.com/verifierd/verifierd/adapters/fhir"
	"github.com/verifierd/verifierd/sdk/plugin"
)

func main() { plugin.Main(fhir.New) }
