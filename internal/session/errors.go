package session

import (
	"encoding/json"
	"errors"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// ErrorKind classifies a refusal for the API layer, which maps it to a
// gRPC status (and through it an HTTP status) in internal/server: session
// returns typed errors and knows nothing of either protocol.
type ErrorKind int

// Refusal kinds.
const (
	// Invalid input: a malformed deployment, contract or request.
	Invalid ErrorKind = iota + 1
	// Refused: the session must not proceed (the client must not actuate).
	Refused
	// NotFound: no such session.
	NotFound
	// Denied: the caller asked for something only the operator may decide
	// (an inline deployment, its own contracts under
	// require_registered_contracts).
	Denied
	// Exists: the id is taken by a run begun with other arguments.
	Exists
)

// Error is a session's refusal: the fields of the SDK's one refusal
// (sdk/refusal: Code, Path, Message) taken from the refusal below it (a
// parameter, a contract, a deployment key, an adapter's section) or made
// here, and how it is answered: Kind picks the API's status (internal/server
// maps it), Reason and Kind the terminal outcome of a refused
// Begin (refusalOutcome). Code is a public reason code when set; a
// classification code of a refusal below (config.CodeSecretNotAllowed) is
// read into Reason, not copied.
type Error struct {
	Kind    ErrorKind
	Code    string // judge code (INVALID_CONTRACT, UNBOUND_PARAM) or rule code (no_change_claim, …) when relevant
	Path    string
	Message string

	// Reason classifies a refusal for its terminal outcome (reasonPolicy,
	// reasonPlatform); empty otherwise.
	Reason string
	// TerminalOutcome and Receipt are set on a refused Begin recorded in
	// the ledger: REJECTED_POLICY, FAILED_PLATFORM or HALTED_BEFORE_EFFECT,
	// and the signed receipt of the refusal (DSSE envelope JSON).
	TerminalOutcome string
	Receipt         json.RawMessage
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Message
	}
	return e.Path + ": " + e.Message
}

func judgeError(err error) error {
	if je, ok := errors.AsType[*refusal.Error](err); ok {
		return &Error{Kind: Invalid, Code: je.Code, Path: clipMsg(je.Path), Message: clipMsg(je.Message)}
	}
	return &Error{Kind: Invalid, Message: clipMsg(err.Error())}
}

// refusalOutcome names the terminal outcome of a Begin refusal: a trust
// rule or contract guard (Denied, or a guard's rule code) and a secret
// outside secrets.allow are the operator's policy; a
// plugin that cannot start or a deployment file that cannot be read is the
// platform; a baseline that cannot be read halts before any effect.
func refusalOutcome(e *Error) string {
	if e.Kind == Denied {
		return OutcomeRejectedPolicy
	}
	switch e.Reason {
	case reasonPolicy:
		return OutcomeRejectedPolicy
	case reasonPlatform:
		return OutcomeFailedPlatform
	}
	return string(judge.HaltedBeforeEffect)
}

// Reasons a refusal carries for refusalOutcome.
const (
	reasonPolicy   = "policy"
	reasonPlatform = "platform"
)

// resolveReason classifies a refusal of the deployment's resolving
// (config.Candidate.Resolve) by its code, never its text: a secret outside
// secrets.allow is the operator's policy; anything else (a secret missing
// from the environment, an option parameter the run does not give) is the
// platform's.
func resolveReason(code string) string {
	if code == config.CodeSecretNotAllowed {
		return reasonPolicy
	}
	return reasonPlatform
}

func isKind(err error, k ErrorKind) bool {
	var se *Error
	return errors.As(err, &se) && se.Kind == k
}
