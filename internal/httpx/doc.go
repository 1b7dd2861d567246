// Package httpx owns what verifierd's HTTP clients share: the HTTP adapters
// (rest, graphql, fhir) and the compensator's REST DELETE. It declares the
// keys their sections share (Endpoint, Auth), which they embed in the config
// structs the SDK's strict decoder fills, checks them with the path in
// every refusal, binds {param} values, builds the HTTP client (TLS verification, a private CA,
// same-origin redirects only), attaches the credentials the daemon
// resolved, reads bounded response bodies, walks dotted paths through
// decoded JSON with exact numbers, reads a list's pages whole and proves it
// complete (Completeness: pagination or single_response, max_records, a
// declared total), flattens nested records with the field_paths language
// (FieldPath), and describes a failed request with a short, redacted
// excerpt of what the server said.
//
// It imports only the public sdk, so the adapters that use it stay written
// as a customer's would be.
package httpx
