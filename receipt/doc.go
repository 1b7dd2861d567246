// Package receipt checks what leaves verifierd signed, with no daemon and no
// network: a DSSE envelope (Ed25519 over the envelope's pre-authentication
// encoding) holding a verdict receipt, and an exported ledger whose entries
// form a SHA-256 hash chain ending at a signed checkpoint of its head
// (docs/receipts.md).
//
// Envelope.Open checks a signature; CheckSubject (or Envelope.OpenExpecting)
// checks that a verdict receipt is about the session, deployment and
// workflow step the caller expected. Every signed payload's format is a
// type here (VerdictPayload, ArtifactPayload, RunPayload, Checkpoint,
// RewardReceiptPayload, RewardCertificatePayload), and each receipt has one
// typed opener that checks the signature and the payload type and decodes
// it: OpenVerdict, OpenArtifact, OpenRun, OpenRewardReceipt,
// OpenRewardCertificate. ReadExport reads an export,
// VerifyChain checks that its lines fit together, and VerifySigned that it
// ends exactly at a checkpoint signed by the daemon's key, naming a
// truncated, extended or rewritten export with its seq.
//
// It is small and imports only the standard library, so a Go caller can
// vendor it to check a receipt offline.
package receipt
