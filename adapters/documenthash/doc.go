// Package documenthash is verifierd's first-party adapter for document
// stores on disk, kind `document-hash`: it reports the exact bytes of each
// document under a folder as a SHA-256, so a contract can prove which
// document landed and that nothing else changed.
//
// Configuration (the deployment's effects section):
//
//	kind: document-hash
//	root: /srv/exports        # an existing folder
//	glob: "reports/*.pdf"     # optional; default "*" (the files directly under root)
//
// The glob is a path.Match pattern applied to each file's path relative to
// root, with '/' between folders; '*' never crosses a '/', so "*/*.pdf"
// matches one folder level down. The tree is walked, pruning folders the
// glob cannot reach.
//
// Each matching regular file is one record: id and path (the relative
// path), name (its base name), size (bytes, an integer), mtime (RFC 3339,
// UTC) and sha256 (hex), hashed by streaming the file through a fixed
// buffer, never reading it whole. Symbolic links are followed only while
// they stay inside root (os.Root); a link out of root, or an absolute one,
// is skipped. A root that is gone or cannot be listed makes the capture
// unreachable.
//
// The package imports only the public sdk, as a customer's adapter would;
// cmd/plugins/document-hash serves it as verifier-adapter-document-hash.
package documenthash

import "github.com/verifierd/verifierd/sdk"

// Kind is the deployment's `kind:` for this adapter.
const Kind = "document-hash"

// info describes the adapter: the bytes of the store itself are an
// independent system-of-record read, and a listing of a folder hides
// nothing, so absence is proof.
var info = sdk.Info{
	Kind:        Kind,
	Tier:        sdk.TierIndependentSystem,
	Description: "SHA-256, size and modification time of each document under a folder",
}
