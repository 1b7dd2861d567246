// Package judge owns every verdict verifierd gives: the effect contract model,
// parameter binding, canonical values and identity, the three judgements,
// freshness, result classes, step outcomes, the contract hash, evidence
// redaction, reconciliation tasks and settlement polling.
//
// It is pure Go with no I/O: clocks and readers are injected. The daemon, the
// verifyctl harness and the tests all call the same functions.
package judge
