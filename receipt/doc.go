// Package receipt checks what leaves verifierd signed, with no daemon and no
// network: a DSSE envelope (Ed25519 over the envelope's pre-authentication
// encoding) holding a verdict receipt, and an exported ledger whose entries
// form a SHA-256 hash chain. It is small and imports only the standard
// library, so a Go caller can vendor it to check a receipt offline.
package receipt
