// Package compact is the judge's compact form of a read and its fast
// readers: a Batch holds a read's records as runs of pointer-free Fields
// over one document, the Scanner decodes JSON straight into it,
// RecordStream decodes records as they arrive (projecting and digesting
// them), and a stored baseline index is written and read back here. It is
// the judge's performance machinery, not its language: package judge
// exposes what callers use (Batch, RecordStream, Projection, the
// decoders), and the conformance harness reads case files with the
// Scanner.
//
// judge's Batch, RecordStream, Projection and SyntaxError are aliases of
// this package's types, so every exported method and field of those is
// judge's promise to its customers (api/judge.txt lists them). What only
// the judge and the daemon use (a record's Fields, matching, projection
// marks, canonical text of a batch's records) is therefore a function of
// this package, At(b, i) rather than b.At(i): the daemon's packages import
// it here, under the module's internal/, and a customer cannot. Keep a new
// helper a function, unless the judge's documented API needs it.
package compact
