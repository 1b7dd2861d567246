// Command verifier-adapter-ui_readback serves the first-party ui_readback
// adapter (adapters/uireadback) as a verifierd plugin. It drives a headless
// Chromium (Debian's chromium package), which it stops, removing the
// browser's temporary profile folder, when the daemon stops the plugin or
// the process receives SIGTERM. Build it under that name:
//
//	go build -o .cache/bin/verifier-adapter-ui_readback ./cmd/plugins/ui_readback
package main

import (
	"github.com/verifierd/verifierd/adapters/uireadback"
	"github.com/verifierd/verifierd/sdk/plugin"
)

func main() {
	defer uireadback.CloseOnTerminate()()
	plugin.Main(uireadback.New)
}
