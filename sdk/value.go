package sdk

import (
	"encoding/json"
	"errors"

	"github.com/verifierd/verifierd/sdk/param"
)

// Value is one value of an adapter's section that may come from the run:
// literal text, or a {param: name} reference to a run parameter. It decodes
// strictly (DecodeConfig, encoding/json) from exactly one of
//
//	"text"                 a literal
//	{literal: "text"}      a literal
//	{param: name}          the run parameter name
//
// and refuses anything else (a number, a list, an object with other keys).
// An adapter decodes its Values once, at Configure, and binds them per
// call with the call's Params; what a bound value may hold where it goes (a
// path segment, a query value, a file name) is sdk/param's placement.
type Value struct {
	v param.Value
}

// Literal is a Value of fixed text.
func Literal(text string) Value { return Value{param.Value{Literal: text}} }

// Param is a Value naming the run parameter name.
func Param(name string) Value { return Value{param.Value{Param: name}} }

// IsParam reports whether v names a run parameter.
func (v Value) IsParam() bool { return v.v.IsParam() }

// Name is the run parameter v names ("" for a literal).
func (v Value) Name() string { return v.v.Param }

// String shows v as written: the literal's text, or {param: name}.
func (v Value) String() string {
	if v.IsParam() {
		return "{param: " + v.v.Param + "}"
	}
	return v.v.Literal
}

// UnmarshalJSON decodes one value expression, strictly.
func (v *Value) UnmarshalJSON(b []byte) error {
	pv, err := param.ParseJSON(b, "")
	if err != nil {
		if perr, ok := errors.AsType[*param.Error](err); ok {
			return errors.New(perr.Message)
		}
		return err
	}
	v.v = pv
	return nil
}

// MarshalJSON writes v in the form it decodes from.
func (v Value) MarshalJSON() ([]byte, error) {
	if v.IsParam() {
		return json.Marshal(map[string]string{"param": v.v.Param})
	}
	return json.Marshal(v.v.Literal)
}

// Bind returns the literal, or the value of the run parameter v names in
// params. A parameter the run does not supply is a *ConfigError (no path:
// BindAt names one): a read must never go out with a hole where its subject
// belongs.
func (v Value) Bind(params map[string]string) (string, error) { return v.BindAt(params, "") }

// BindAt is Bind with the value's dotted path in the section, for the
// refusal.
func (v Value) BindAt(params map[string]string, path string) (string, error) {
	return v.v.Bind(params, path)
}
