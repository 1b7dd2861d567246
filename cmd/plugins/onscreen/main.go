// Command verifier-adapter-onscreen serves the first-party onscreen adapter
// (adapters/onscreen) as a verifierd plugin. It reads the application's own
// screen through the Chromium the automation drives, with Tesseract for OCR.
//
//	go build -o .cache/bin/verifier-adapter-onscreen ./cmd/plugins/onscreen
package main

import (
	"github.com/verifierd/verifierd/adapters/onscreen"
	"github.com/verifierd/verifierd/sdk/plugin"
)

func main() { plugin.Main(onscreen.New) }
