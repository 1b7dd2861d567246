// Command verifier-adapter-ui_readback serves the first-party ui_readback
// adapter (adapters/uireadback) as a verifierd plugin. It drives a headless
// Chromium (Debian's chromium package). Build it under that name:
//
//	go build -o .cache/bin/verifier-adapter-ui_readback ./cmd/plugins/ui_readback
package main

import (
	"github.com/verifierd/verifierd/adapters/uireadback"
	"github.com/verifierd/verifierd/sdk/plugin"
)

func main() { plugin.Main(uireadback.New) }
