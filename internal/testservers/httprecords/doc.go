// Package httprecords runs real HTTP systems of record on loopback for the
// tests of the HTTP adapters and of the daemon end to end: a Frappe-shaped
// REST API, a GraphQL API built with graph-gophers/graphql-go, a FHIR R4
// server answering searchset Bundles, and Loans, a loan-application
// store (SQLite or PostgreSQL) behind both a REST and a GraphQL API, with
// the faults a sound read must survive (a page cap, amounts stored as
// floats, a late duplicate). The first three keep their records in memory;
// tests write through the server's own API (or, for bulk seeding, through
// the store) and can take it down, slow it, or make it fail.
//
// Servers listen on 127.0.0.1 only, over TLS with a certificate from a CA
// generated for the test (CAFile names its PEM), or over plain HTTP.
//
// It is test support: nothing in the daemon or the adapters imports it.
package httprecords
