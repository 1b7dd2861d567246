// Package runs is the runs service (docs/runs.md): a run is one workflow
// run against one deployment. BeginRun stores it; each session Begin with
// its RunID binds a session to one of its steps under the workflow's
// order (after:, handoffs, consumes: BeginStep); VerifyRunArtifact records
// its artifact edges; FinishRun reads its sessions again, classifies it
// and seals it with a signed run receipt; RollbackCheck proves it undone;
// GetRun and ListRuns report it. Everything is in the store
// (store.Backend's runs): another replica sharing it continues a run, and
// a daemon killed at any point loses no state a caller was told of.
//
// It differs from internal/run, the classifier: run is a pure function
// from the steps' and artifacts' states to the run's one outcome, tier,
// rung and reasons; runs is the service around it, which gathers that
// input from the store, checks a step's Begin, signs the seal into the
// ledger and answers the API (internal/server, internal/console).
//
// It reaches sessions only through a session.RunHost (Manager.RunHost):
// a Begin bound to a step, a session's latest result, a re-read of a
// session against its baseline (judged by internal/session's one judging
// path, proof.go: runs judges nothing itself), artifact reads, the
// registered workflows and deployments, the store and the ledger signer.
// New attaches the service to its RunHost, so that a session Begin with a
// RunID comes to BeginStep; internal/session never imports this package.
package runs
