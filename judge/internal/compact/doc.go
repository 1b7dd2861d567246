// Package compact is the judge's compact form of a read and its fast
// readers: a Batch holds a read's records as runs of pointer-free Fields
// over one document, the Scanner decodes JSON straight into it,
// RecordStream decodes records as they arrive (projecting and digesting
// them), and a stored baseline index is written and read back here. It is
// the judge's performance machinery, not its language: package judge
// exposes what callers use (Batch, RecordStream, Projection, the
// decoders), and the conformance harness reads case files with the
// Scanner.
package compact
