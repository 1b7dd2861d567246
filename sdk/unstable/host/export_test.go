package host

import "github.com/verifierd/verifierd/sdk/internal/wire"

// Handshake is the go-plugin handshake, for the tests that start the test
// plugin by hand.
var Handshake = wire.Handshake
