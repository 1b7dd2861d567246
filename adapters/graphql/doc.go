// Package graphql is verifierd's first-party adapter for systems of record
// with a GraphQL API, kind `graphql`: it runs one read-only query (once per
// page when paged) and hands the list at graphql_records_path to the judge
// as records.
//
// Configuration (the deployment's effects section; docs/adapters/graphql.md
// has the full reference):
//
//	kind: graphql
//	base_url: https://emr.example.com/graphql     # the endpoint itself
//	graphql_query: |
//	  query Encounters($patient: String!) {
//	    encounters(patientId: $patient) { id patientId type note updatedAt }
//	  }
//	graphql_variables: {patient: {param: patient_id}}
//	graphql_records_path: encounters              # inside data; optional for one top-level field
//	single_response: true                         # or pagination: {...}
//	max_records: 100                              # an answer this full is not judged
//	auth: {bearer_env: EMR_READ_TOKEN}
//	freshness_field: updatedAt                    # the daemon's freshness window
//	freshness_window_s: 300
//
// graphql_query is parsed at configure time with a GraphQL parser
// (vektah/gqlparser): a mutation, a subscription, or more than one
// operation refuses the configuration. Variables are bound from the run's
// parameters and typed as the query declares them (Int and Float as
// numbers, Boolean as true/false, anything else as a string).
//
// A section states how its read is whole, or is refused at load:
// pagination (offset paging, {limit_variable, offset_variable, page_size},
// or Relay cursors, {after_variable, page_info_path}), or single_response
// with an optional max_records; either may add total_path or total_header,
// a count the records read must equal. A read that is not whole is an
// unreachable capture with sdk.CodeReadIncomplete or
// sdk.CodeReadMayBeTruncated. field_paths flattens nested records
// (httpx.FieldPath).
//
// The query is POSTed as JSON, the one method this adapter sends (a GraphQL
// read is a POST). A transport error, a status outside 2xx, a body that is
// not a GraphQL response, an answer with errors (even next to partial data),
// or a records path missing from data, on any page, makes the capture
// unreachable, with the errors' messages (clipped, the credential masked)
// or a redacted excerpt. Every page is read before the capture answers. A null on the way to the list
// (the query resolved the entity to nothing) is an answer with no records.
//
// Freshness is judged by the daemon (freshness_field, freshness_window_s).
// The daemon loads the kit's graphql_freshness_field and
// graphql_freshness_window_s as those keys before the adapter sees the
// section; configured directly, the adapter refuses them with a pointer to
// the daemon's keys. A verdict hook cannot do it cleanly: the
// hook sees neither the matched records nor, when effects share a read,
// the selector, and its demotion would class as indeterminate, not stale.
//
// The package imports only the public sdk and internal/httpx (the HTTP
// helpers it shares with the other HTTP adapters and the compensator), as
// a customer's adapter would; cmd/plugins/graphql serves it as verifier-adapter-graphql.
package graphql

import "github.com/verifierd/verifierd/sdk"

// Kind is the deployment's `kind:` for this adapter.
const Kind = "graphql"

// info describes the adapter: the system of record's own API is an
// independent read, and a query answers everything it selects, so absence
// is proof.
var info = sdk.Info{
	Kind:        Kind,
	Tier:        sdk.TierIndependentSystem,
	Description: "one read-only GraphQL query; records are the list at graphql_records_path",
}
