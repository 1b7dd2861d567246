package client

import (
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Refused is a Begin the daemon refused by policy (PermissionDenied) or
// for its state (FailedPrecondition): no session was opened, and the
// action must not run.
type Refused struct {
	Code    codes.Code
	Message string
	// Rule is the daemon's rule or reason code when it names one (e.g.
	// registered_contracts_required, inline_deployment_refused).
	Rule string
	// TerminalOutcome and Receipt are set when the daemon recorded the
	// refusal in its ledger: REJECTED_POLICY and the signed receipt of it.
	TerminalOutcome Outcome
	Receipt         []byte
	st              *status.Status
}

func (e *Refused) Error() string {
	if e.Rule != "" {
		return fmt.Sprintf("verifierd refused the step (%s, %s): %s", e.Code, e.Rule, e.Message)
	}
	return fmt.Sprintf("verifierd refused the step (%s): %s", e.Code, e.Message)
}

// GRPCStatus is the daemon's status, for status.FromError and status.Code.
func (e *Refused) GRPCStatus() *status.Status { return e.st }

// refusal turns Begin's PermissionDenied and FailedPrecondition into a
// *Refused; every other error is returned as it is.
func refusal(err error) error {
	st, ok := status.FromError(err)
	if !ok || (st.Code() != codes.PermissionDenied && st.Code() != codes.FailedPrecondition) {
		return err
	}
	r := &Refused{Code: st.Code(), Message: st.Message(), st: st}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok {
			continue
		}
		switch info.GetDomain() {
		case "verifierd":
			r.Rule = info.GetReason()
		case "verifierd.receipt":
			r.TerminalOutcome = Outcome(info.GetMetadata()["terminal_outcome"])
			if rc := info.GetMetadata()["receipt"]; rc != "" {
				r.Receipt = []byte(rc)
			}
		}
	}
	return r
}

// NotConfirmed is a step whose outcome is not VERIFIED: the automation
// must not go on as if the write landed. Result says what was found and
// holds the reconciliation tasks.
type NotConfirmed struct {
	Result *Result
}

func (e *NotConfirmed) Error() string {
	n := len(e.Result.Tasks())
	return fmt.Sprintf("the step is not confirmed: %s (session %s, %d reconciliation task(s))", e.Result.Outcome, e.Result.SessionID, n)
}

// ActionError is an action that failed inside Step. The session was
// verified all the same: Result is what the daemon found (nil when the
// verification failed, with VerifyErr). It unwraps to the action's error.
type ActionError struct {
	Err       error
	Session   *Session
	Result    *Result
	VerifyErr error
}

func (e *ActionError) Error() string {
	switch {
	case e.Result != nil:
		return fmt.Sprintf("the action failed (session %s verified: %s): %v", e.Session.ID, e.Result.Outcome, e.Err)
	case e.VerifyErr != nil:
		return fmt.Sprintf("the action failed (session %s, and its verification failed: %v): %v", e.Session.ID, e.VerifyErr, e.Err)
	}
	return fmt.Sprintf("the action failed (session %s): %v", e.Session.ID, e.Err)
}

func (e *ActionError) Unwrap() error { return e.Err }

// ReceiptError is a result whose receipt did not check: not signed by the
// key given to WithReceiptKey, or about another session, deployment or
// step (a *receipt.SubjectError); for a run, not a run receipt of that run
// (*receipt.RunPayloadTypeError, a *receipt.SubjectError of field run).
// The result is not to be trusted. Result is set for a session's result,
// Run for a run's.
type ReceiptError struct {
	Result *Result
	Run    *RunResult
	Err    error
}

func (e *ReceiptError) Error() string {
	if e.Run != nil {
		return fmt.Sprintf("the receipt of run %s does not check: %v", e.Run.RunID, e.Err)
	}
	return fmt.Sprintf("the receipt of session %s does not check: %v", e.Result.SessionID, e.Err)
}

func (e *ReceiptError) Unwrap() error { return e.Err }
