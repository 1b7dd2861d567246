// Command verifier-adapter-ui_readback serves the first-party ui_readback
// adapter (adapters/uireadback) as a verifierd plugin. It drives a headless
// Chromium (Debian's chromium package). Build it under that name:
//
//	go build -o .cache/bin/verifier-adapter-ui_readback ./cmd/plugins/ui_readback
package main

import (
	"log"

	"github.com/verifierd/verifierd/adapters/uireadback"
	"github.com/verifierd/verifierd/sdk/plugin"
)

func main() {
	if err := plugin.Serve(uireadback.New); err != nil {
		log.Fatal(err)
	}
}
