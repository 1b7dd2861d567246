// Package httpread owns what the HTTP adapters (rest, graphql, fhir) share:
// reading their deployment sections key by key with the path in every
// refusal, binding {param} values, building the HTTP client (TLS
// verification, a private CA, same-origin redirects only), attaching the
// credentials the daemon resolved, reading bounded response bodies, walking
// dotted paths through decoded JSON with exact numbers, and describing a
// failed read with a short, redacted excerpt of what the server said.
//
// It imports only the public sdk: the adapters stay written as a customer's
// would be.
package httpread
