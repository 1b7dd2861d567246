// Command verifier-adapter-fhir serves the first-party fhir adapter
// (adapters/fhir) as a verifierd plugin. Build it under that name:
//
//	go build -o .cache/bin/verifier-adapter-fhir ./cmd/plugins/fhir
package main

import (
	"log"

	"github.com/verifierd/verifierd/adapters/fhir"
	"github.com/verifierd/verifierd/sdk/plugin"
)

func main() {
	if err := plugin.Serve(fhir.New); err != nil {
		log.Fatal(err)
	}
}
