// Package file is verifierd's first-party adapter for files that land in a
// folder, kind `file`: a local folder, or a folder on an SFTP server read
// with github.com/pkg/sftp over golang.org/x/crypto/ssh. It reports each
// candidate file (selected by file_pattern) as one record: id (the path
// relative to root), name, path, size, mtime (RFC 3339, UTC), size_ok
// (size >= file_min_size, default 1), fresh (mtime within
// file_mtime_window_s of the read, only when that is set), content_match
// (file_content_probe matched somewhere in the bytes, only when that is
// set) and sha256. Every file is streamed through the hash and the probe,
// never held whole.
//
// Over SFTP the server's host key must be trusted before anything else is
// sent: it must be listed in known_hosts or equal the pinned
// host_key_fingerprint (SHA256:..., as ssh-keygen -l prints it). An unknown
// or changed host key is refused; there is no "accept new keys" mode. The
// credentials (a private key, optionally with a passphrase, or a password)
// are named by environment variable in the section and arrive resolved in
// ConfigureRequest.Secrets; they are never logged or put in a reason.
//
// Neither ssh nor sftp calls take a context, so every capture opens its own
// connection, sets the capture's deadline on it and closes it when the
// capture's context ends: a server that hangs or vanishes mid-read makes
// the capture unreachable within its deadline. A capture reads every
// candidate before it answers, so any failure is an unreachable read and
// never a shorter list of files.
//
// See docs/adapters/file.md for a deployment example and every field. The
// package imports only the public sdk, as a customer's adapter would;
// cmd/plugins/file serves it as verifier-adapter-file, and internal/testservers/sshd
// runs a real OpenSSH server for its tests.
package file

import "github.com/verifierd/verifierd/sdk"

// Kind is the deployment's `kind:` for this adapter.
const Kind = "file"

// info describes the adapter: a listing of the folder where files land is an
// independent read of that system of record, and it hides nothing, so
// absence is proof.
var info = sdk.Info{
	Kind:        Kind,
	Tier:        sdk.TierIndependentSystem,
	Description: "files that arrived in a local folder or on an SFTP server: size, age, content probe and SHA-256",
}
