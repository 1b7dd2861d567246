// Package refusal is the one shape of a refused input, shared from an
// adapter's parameters (sdk/param) through the judge's contracts and the
// daemon's configuration files to the daemon's session refusals. It is a
// leaf of the SDK: standard library only. It is covered by the SDK's
// compatibility promise: an adapter's Configure and CheckParams refuse
// with *Error, and sdk/param's refusals are *Error; no other package
// gives the type another name.
//
// A refusal says what was refused (Code, a stable machine-readable name,
// empty when the refusal needs none), where (Path, the dotted path of the
// offending key, empty when the caller has not said) and what is wrong and
// what to write instead (Message). Callers classify a refusal by its Code,
// never by its Message: the message is for people and may be reworded.
package refusal

import "errors"

// Error is a refused input. Its JSON form ({"code", "message", "path"}) is
// the one the judge's conformance results carry.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Path    string `json:"path,omitempty"`
}

// Error reads "path: message", or the message alone without a path.
func (e *Error) Error() string {
	if e.Path == "" {
		return e.Message
	}
	return e.Path + ": " + e.Message
}

// New is a refusal of the input at path.
func New(code, path, message string) *Error {
	return &Error{Code: code, Path: path, Message: message}
}

// As finds the first refusal in err's chain.
func As(err error) (*Error, bool) {
	return errors.AsType[*Error](err)
}

// CodeOf is the code of the first refusal in err's chain: "" when err
// holds no refusal or one without a code.
func CodeOf(err error) string {
	if r, ok := As(err); ok {
		return r.Code
	}
	return ""
}

// Under is e with prefix joined before its path (prefix alone when e has
// no path); e is not changed.
func (e *Error) Under(prefix string) *Error {
	out := *e
	switch {
	case prefix == "":
	case out.Path == "":
		out.Path = prefix
	default:
		out.Path = prefix + "." + out.Path
	}
	return &out
}
