// Package document is verifierd's first-party adapter for reports and
// exports written to a folder, kind `document`: it proves that a document
// arrived and that its content parses into the values a contract expects.
//
// Each document selected by file_pattern is one record: id (the path
// relative to root), name, path, size, mtime, fresh (file_mtime_window_s,
// when set), parseable, and the parsed fields. document_format json maps
// document_field_paths (record field -> dotted path, array elements by
// index: items.0.sku) or, without them, the top-level keys; document_format
// text takes the named groups of document_text_pattern's first match. A
// document that does not parse is still a record, with parseable false, a
// parse_error and no parsed fields, so a contract that matches on
// parseable "true" refutes it instead of never seeing it.
//
// See docs/adapters/document.md. The package imports the public sdk and the
// helpers it shares with the other adapters (adapters/internal/filewalk for
// the folder, internal/httpx for JSON decoding and dotted paths);
// cmd/plugins/document serves it as verifier-adapter-document.
package document

import "github.com/verifierd/verifierd/sdk"

// Kind is the deployment's `kind:` for this adapter.
const Kind = "document"

// info describes the adapter: the documents are read from the store they
// were written to, an independent read, and a listing hides nothing.
var info = sdk.Info{
	Kind:        Kind,
	Tier:        sdk.TierIndependentSystem,
	Description: "documents that arrived in a folder, each parsed (JSON paths or a named-group pattern) into a record",
}
