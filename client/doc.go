// Package client is the Go client for callers of verifierd: an automation
// asks the daemon to watch one step, performs the step's action, and gets
// back whether the write landed (docs/client-go.md).
//
// Dial connects to the daemon's gRPC API. Begin opens a session (the
// daemon reads the baseline), Verify judges it after the action and
// returns the result with its signed receipt. Step does all three around
// the caller's action with the semantics of the Python client:
//
//   - Begin refused (PermissionDenied or FailedPrecondition): Step returns
//     a *Refused and never runs the action.
//   - The action returns an error (or panics): the session is verified all
//     the same, since the action may have partly happened, and Step
//     returns an *ActionError that unwraps to the action's own error.
//   - The outcome is not VERIFIED: Step returns a *NotConfirmed holding the
//     result (outcome, effects, reconciliation tasks).
//
// With WithReceiptKey every result's receipt is checked before it is
// returned: signed by that Ed25519 key, and about the session, the named
// deployment and the registered workflow step that were asked for (the
// receipt package's Envelope.OpenExpecting). A receipt that fails either
// check is a *ReceiptError, never a result.
package client
