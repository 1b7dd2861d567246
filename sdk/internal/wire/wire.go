// Package wire holds what both ends of the adapter protocol share inside the
// SDK: the go-plugin handshake, the API versions, the transport limits and
// the AdapterService server that sdk/plugin serves and sdk/unstable/host runs in
// process. Nothing here is part of the SDK's public API: sdk/plugin and
// sdk/unstable/host use it, and host.MaxBatchRecords is the one limit they show.
package wire

import (
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/verifierd/verifierd/sdk"
)

// ProtocolVersion is the go-plugin protocol version. It changes only for a
// breaking change of the wire contract; additive changes are negotiated in
// band through APIVersions.
const ProtocolVersion = 2

// PluginName is the key of the adapter in go-plugin's plugin map.
const PluginName = "adapter"

// Handshake is shared by the daemon and every adapter binary.
//
// The magic cookie is a UX guard, not a security control: it only stops a
// person from running an adapter binary by hand and wondering why it prints
// a cryptic line and waits. Anyone can read it here. Security comes from
// AutoMTLS, the empty plugin environment and the daemon's SHA-256 pins.
var Handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "VERIFIERD_ADAPTER_PLUGIN",
	MagicCookieValue: "7c1f0d9a4be35e62a8d04f17c93b5e2d61f8a0c47e9b3d25f6a1c08e74d2b9f3",
}

// APIVersions lists the in-band API versions this SDK speaks, newest first.
var APIVersions = []string{sdk.APIVersion}

// Transport limits. Every gRPC message is bounded by MaxMessageBytes on both
// sides; captures are cut into batches of at most MaxBatchRecords records and
// MaxBatchBytes bytes, well under that bound, so a read set of any size
// streams and no single record set sits in one message.
const (
	MaxMessageBytes = 8 << 20
	MaxBatchRecords = 1000
	MaxBatchBytes   = 1 << 20
	// MaxRecordBytes bounds one encoded record; a larger one fails the
	// capture with codes.ResourceExhausted.
	MaxRecordBytes = 4 << 20
)

// WindowBytes is the HTTP/2 flow-control window of every adapter stream and
// connection, on both sides. A fixed window turns off gRPC's bandwidth-delay
// estimation, which otherwise answers the first data of every call with a
// PING and its ACK (two more writes and wake-ups in each process for a
// small read); the estimator's own ceiling (16 MiB) is the fixed size, so a
// large capture streams as it did once the estimate had grown. Either end
// sets it alone: an older peer keeps estimating on its side.
const WindowBytes = 16 << 20

// DialOptions are the transport options of the daemon's connection to an
// adapter: the fixed windows (WindowBytes).
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithStaticStreamWindowSize(WindowBytes),
		grpc.WithStaticConnWindowSize(WindowBytes),
	}
}

// ServerOptions are the transport options of an adapter's server: the
// fixed windows (WindowBytes).
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.StaticStreamWindowSize(WindowBytes),
		grpc.StaticConnWindowSize(WindowBytes),
	}
}

// CallOptions bound every call's messages on the client side, as the server
// bounds them.
func CallOptions() []grpc.CallOption {
	return []grpc.CallOption{
		grpc.MaxCallRecvMsgSize(MaxMessageBytes),
		grpc.MaxCallSendMsgSize(MaxMessageBytes),
	}
}
