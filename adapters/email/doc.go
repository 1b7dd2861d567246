// Package email is verifierd's first-party adapter for delivered mail, kind
// `email`: it reads the messages at a capture point, either a maildir (new/
// and cur/; tmp/ holds deliveries in progress and is never read) or a plain
// folder of message files such as an SMTP capture tool writes.
//
// Each message is one record: id (the maildir unique name, which survives
// a move from new/ to cur/, or the file name), name, path, mtime; to (every
// recipient from To, Cc, Bcc, Delivered-To, X-Original-To and Envelope-To,
// lowercased addr-specs, sorted, comma-joined), from, subject (RFC 2047
// decoded), message_id, date (RFC 3339, UTC); body_match (file_content_probe
// over the decoded text/plain and text/html parts that are not attachments,
// after quoted-printable or base64 and charset decoding) and fresh
// (file_mtime_window_s), each only when configured; parseable, with
// parse_error when a file is not a message. No file is skipped silently.
//
// The adapter is also a verdict hook: with expected_recipients set, a
// CONFIRMED verdict is demoted to REFUTED (EMAIL_UNEXPECTED_RECIPIENT) when
// a message the effect matched was delivered to any other address. It only
// ever demotes.
//
// What a record proves is delivery to the capture point, not that a person
// received or read the message. See docs/adapters/email.md. The package
// imports only the public sdk; cmd/plugins/email serves it as
// verifier-adapter-email, and internal/testservers/smtp runs a real SMTP server that
// delivers into a maildir for its tests.
package email

import "github.com/verifierd/verifierd/sdk"

// Kind is the deployment's `kind:` for this adapter.
const Kind = "email"

// info describes the adapter: the messages at the capture point are read
// from its own files, an independent read; a listing hides nothing, so
// absence is proof (of absence at the capture point).
var info = sdk.Info{
	Kind:        Kind,
	Tier:        sdk.TierIndependentSystem,
	Description: "messages delivered to a maildir or an SMTP capture folder: recipients, sender, subject, body probe",
}
