// Package rest is verifierd's first-party adapter for systems of record
// with a REST API, kind `rest`: it GETs a JSON list of records (a Frappe
// /api/resource list, or any endpoint answering a list) and hands its
// elements to the judge as records. It only ever sends GET.
//
// Configuration (the deployment's effects section; docs/adapters/rest.md
// has the full reference):
//
//	kind: rest
//	base_url: https://erp.example.com
//	records_path: /api/resource/Patient%20Encounter?fields=["*"]&filters=[["patient","=","{patient}"]]
//	path_params: {patient: {param: patient_id}}
//	records_key: data
//	pagination: {offset_param: limit_start, limit_param: limit_page_length, page_size: 500}
//	total_path: total_count                     # optional: the count the read must equal
//	field_paths: {name: name, claim_no: custom_fields[id=1].value}
//	auth: {header: Authorization, value_env: ERP_READ_TOKEN}
//	ca_file: /etc/verifierd/erp-ca.pem
//
// A placeholder is filled per call from path_params, path-escaped before
// the first '?' and query-escaped after it. A section states how its read
// is whole, or is refused at load: pagination, or single_response (one
// response holds the list) with an optional max_records; either may add
// total_path or total_header. Every page is read before the capture
// answers: a transport error, a status outside 2xx, a body that is not
// JSON, or no list at records_key, on any page, makes the capture
// unreachable, with the status and a short excerpt of the body in which
// every form of the credential is redacted; a read that answered but is
// not whole (past max_pages, a response of max_records or more, a count
// other than the declared total) is unreachable with
// sdk.CodeReadIncomplete or sdk.CodeReadMayBeTruncated. A partial list is
// never judged. The whole read is bounded by the capture's deadline.
//
// The package imports only the public sdk and internal/httpx (the HTTP
// helpers it shares with the other HTTP adapters and the compensator), as
// a customer's adapter would; cmd/plugins/rest serves it as verifier-adapter-rest.
package rest

import "github.com/verifierd/verifierd/sdk"

// Kind is the deployment's `kind:` for this adapter.
const Kind = "rest"

// info describes the adapter: the system of record's own API is an
// independent read, and a list endpoint returns every record it selects,
// so absence is proof.
var info = sdk.Info{
	Kind:        Kind,
	Tier:        sdk.TierIndependentSystem,
	Description: "GET a JSON list of records from the system of record's REST API",
}
