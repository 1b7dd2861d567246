// Package fhir is verifierd's first-party adapter for FHIR R4 servers
// (HAPI, OpenEMR, Epic), kind `fhir`: it runs one search and flattens each
// matching resource into a record for the judge.
//
// Configuration (the deployment's effects section; docs/adapters/fhir.md
// has the full reference):
//
//	kind: fhir
//	base_url: https://emr.example.com/apis/default/fhir
//	resource_type: Observation
//	search_params: {status: final, _count: "100"}        # literal
//	search_param_exprs: {patient: {param: patient_ref}}  # bound from the run
//	field_paths:
//	  id: id
//	  patient: subject.reference
//	  code: code.coding.0.code
//	  value: valueQuantity.value
//	access_token_env: EMR_FHIR_TOKEN
//	ca_file: /etc/verifierd/emr-ca.pem
//
// The search is GET [base]/[type]?[params] with Accept application/fhir+json.
// The answer must be a searchset Bundle; its pages are followed through
// link[relation=next] (same origin only, at most max_pages, default 100),
// and when the first Bundle states a total, the matches read must add up
// to it; a search past max_pages or short of its total is an unreachable
// capture with sdk.CodeReadIncomplete.
// Entries in search mode match of resource_type become records; include
// entries are skipped; an outcome entry with an error or fatal issue fails
// the read. An OperationOutcome (with any status), a 401 or 403, or any
// other failure makes the capture unreachable with the outcome's severity,
// code, details and diagnostics. Every page is read before the capture
// answers, so a partial result is never judged.
//
// field_paths maps a record field to a path into the resource, in the
// language the HTTP adapters share (httpx.FieldPath): a segment of digits
// indexes an array (code.coding.0.code), key[name=value] selects the one
// element of an array of objects whose name is value
// (identifier[system=urn:claims].value), and arrays are never entered
// otherwise. A path that leads nowhere or to null leaves the
// field out. Numbers keep their exact text (185.00 stays 185.00 in the
// evidence; the judge compares 185.00 and 185 as equal). Without
// field_paths the record is the whole resource.
//
// The package imports only the public sdk and internal/httpx (the HTTP
// helpers it shares with the other HTTP adapters and the compensator), as
// a customer's adapter would; cmd/plugins/fhir serves it as verifier-adapter-fhir.
package fhir

import "github.com/verifierd/verifierd/sdk"

// Kind is the deployment's `kind:` for this adapter.
const Kind = "fhir"

// info describes the adapter: a FHIR server's search API is an independent
// read of the record store, and a searchset holds every match, so absence
// is proof.
var info = sdk.Info{
	Kind:        Kind,
	Tier:        sdk.TierIndependentSystem,
	Description: "FHIR R4 search; each matching resource flattened into a record by field_paths",
}
