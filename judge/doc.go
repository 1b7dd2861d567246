// Package judge owns every verdict verifierd gives: the effect contract model,
// parameter binding, canonical values and identity, the three judgements,
// freshness, result classes, step outcomes, the contract hash, evidence
// redaction, reconciliation tasks and settlement polling.
//
// It is pure Go with no I/O: clocks and readers are injected. The daemon, the
// verifyctl harness and the tests all call the same functions.
//
// Large reads are judged in compact form (Batch, built by RecordStream and
// DecodeRecordList, judged by JudgeBatch with the verdicts Judge gives on
// maps). How that form is laid out, scanned, projected and indexed is the
// judge's own business (internal/compact), not part of its language: a
// Batch promises Len and Record, a RecordStream what reading, projecting,
// digesting and indexing a read take (Add, Batch, Len, Project, Digest,
// Index, IndexErr, AddEntry); the daemon reaches the rest through
// functions of internal/compact, which no customer can import.
package judge
