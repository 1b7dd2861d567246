// Package uireadback is verifierd's first-party adapter for applications
// with no API, database or export to read, kind `ui_readback`: it opens the
// application's own record page in a separate, separately signed-in,
// read-only headless Chromium session and returns one record per row of
// the page. It reads a record page, not the system of record: it declares
// tier 2 (independent session) and that absence on its surface is not
// proof, so the daemon classes its refutations as conflicting and never
// ends a step HALTED_BEFORE_EFFECT on what the page does not show.
//
// Each read-back (every capture and every preflight):
//
//  1. takes a brand-new browser context (an off-the-record profile: no
//     cookies, storage, cache or service workers from any other read) in a
//     pooled headless Chromium that never typed anything; the context is
//     disposed of when the read-back ends;
//  2. installs the read-only guards (guard.go): a script in every page and
//     frame before any page script, and network interception of every
//     request;
//  3. signs in with the read-back account through the sign-in form (the one
//     write allowed, a POST to sign_in.url, and only until the signed-in
//     element appears), unless the application rejected the credential
//     sign_in.max_attempts times in a row within the settlement window:
//     then the read answers at once, unusable, so that retries never lock
//     the account (signin.go), with sdk.CodeAccessRejected (as does the
//     rejected sign-in that made the gate hold), so that the daemon stops
//     reading for the effect;
//  4. opens record_url with its parameters bound and escaped, waits for
//     ready_selector (or not_found_selector), and checks that the page
//     shows identity.value;
//  5. reads every row_selector row's fields from the DOM, in an isolated
//     world the page's scripts cannot reach, collapsing whitespace, refusing
//     shortened values, and applying date_format and casefold; a shortened
//     value or a date that does not parse is refused only in a field a
//     contract of the read looks at (CaptureRequest.ReadFields: every field
//     when the daemon sends none); a value is reported in the contracts'
//     spelling (CaptureRequest.ExpectedValues, or the run's parameters from
//     an older daemon) when that spelling, normalised the same way, is the
//     value read (spellings), so the normalisation holds on both sides of
//     the judge's comparison.
//
// Whatever keeps the page from being read as the record (a failed sign-in,
// a timeout, another record's page, no identifier, selectors that no longer
// match, a shortened value, a refused request) makes the capture
// unreachable with the reason, which the daemon's judge turns into
// INDETERMINATE. The adapter never decides a verdict.
//
// Configuration, the deployment's effects section (see
// docs/adapters/ui_readback.md for the whole reference):
//
//	kind: ui_readback
//	ui_readback:
//	  record_url: "https://app.example.org/patients/{patient}/encounters"
//	  url_params: {patient: {param: patient_id}}
//	  sign_in: {url: ..., username_selector: ..., password_selector: ...,
//	            submit_selector: ..., signed_in_selector: ...,
//	            username_env: APP_READER_USERNAME, password_env: APP_READER_PASSWORD}
//	  ready_selector: "#encounters"
//	  empty_selector: "#no-encounters"
//	  row_selector: "tr.encounter"
//	  fields: {id: {attribute: data-id}, note: {selector: td.note}}
//	  identity: {reader: {selector: "#patient-mrn"}, value: {param: patient_id}, field: patient_id}
//
// The package imports only the public sdk, as a customer's adapter would;
// cmd/plugins/ui_readback serves it as verifier-adapter-ui_readback.
package uireadback
