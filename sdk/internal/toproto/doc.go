// Package toproto converts the SDK's plain Go types into the generated
// adapter protobuf messages, encodes records as compact JSON, and cuts record
// streams into bounded batches. With fromproto it is the only place where
// generated types and SDK types meet; nothing it returns leaks into the SDK's
// public API.
package toproto
