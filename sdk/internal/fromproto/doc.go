// Package fromproto converts the generated adapter protobuf messages into the
// SDK's plain Go types, and decodes wire records (one JSON object each, with
// numbers kept as exact json.Number text). With toproto it is the only place
// where generated types and SDK types meet.
package fromproto
