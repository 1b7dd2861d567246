package session

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk/unstable/jsondepth"
)

// The daemon's input limits, in one place (docs/daemon.md, "Limits"). Every
// structure a request can make the daemon hold is bounded by one of them;
// input over a limit is refused with InvalidArgument naming the path and the
// limit, and the refusal never echoes the oversized value.
const (
	// MaxRequestBytes bounds one public API message; the gRPC server's
	// receive size is set to it (bigger messages get ResourceExhausted).
	MaxRequestBytes = 16 << 20
	// MaxDocumentBytes bounds a deployment YAML and an effects document.
	MaxDocumentBytes = 1 << 20
	// MaxDocumentDepth bounds the nesting of a deployment or effects
	// document (maps and lists). YAML aliases are refused outright (judge),
	// so no alias is ever expanded.
	MaxDocumentDepth = 32
	// MaxEffects bounds the effect contracts of one step.
	MaxEffects = 1000
	// MaxCandidates bounds the candidates of one deployment.
	MaxCandidates = 32
	// MaxParams bounds the run parameters of one request.
	MaxParams = 256
	// MaxParamNameBytes bounds one parameter name.
	MaxParamNameBytes = 128
	// MaxParamValueBytes bounds one parameter value.
	MaxParamValueBytes = 64 << 10
	// MaxIDBytes bounds a session id (Begin's ids are 36 bytes).
	MaxIDBytes = 128
	// MaxNameBytes bounds a deployment name and an adapter kind.
	MaxNameBytes = 256

	// docCacheBytes and docCacheEntries bound the parsed-document cache,
	// counted in bytes of the source documents it holds.
	docCacheBytes   = 4 << 20
	docCacheEntries = 256
	// shownBytes is how much of an offending value a refusal may quote;
	// messageBytes how long a refusal's path or message may be.
	shownBytes   = 64
	messageBytes = 1024
)

// clip shortens a value for an error message: never echo a huge input whole.
func clip(s string) string { return clipTo(s, shownBytes) }

// clipMsg shortens a refusal's path or message, which can quote input.
func clipMsg(s string) string { return clipTo(s, messageBytes) }

func clipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:cut], len(s))
}

func overLimit(path string, got, limit int, unit, fix string) error {
	return &Error{Kind: Invalid, Path: path, Message: fmt.Sprintf("%d %s is over the limit of %d %s; %s", got, unit, limit, unit, fix)}
}

// CheckSessionID refuses a session id no Begin can have returned.
func CheckSessionID(id string) error {
	switch {
	case id == "":
		return &Error{Kind: Invalid, Path: "session_id", Message: "give the session id that Begin returned"}
	case len(id) > MaxIDBytes:
		return overLimit("session_id", len(id), MaxIDBytes, "bytes", "give the session id that Begin returned")
	case !utf8.ValidString(id):
		return &Error{Kind: Invalid, Path: "session_id", Message: "not valid UTF-8; give the session id that Begin returned"}
	}
	return nil
}

// checkParams bounds the run parameters.
func checkParams(params map[string]string) error {
	if len(params) > MaxParams {
		return overLimit("params", len(params), MaxParams, "parameters", "send only the parameters the contracts use")
	}
	for k, v := range params {
		switch {
		case len(k) > MaxParamNameBytes:
			return overLimit("params", len(k), MaxParamNameBytes, "bytes", fmt.Sprintf("parameter name %q is too long", clip(k)))
		case !utf8.ValidString(k) || !utf8.ValidString(v):
			return &Error{Kind: Invalid, Path: "params." + clip(k), Message: "not valid UTF-8; send text"}
		case len(v) > MaxParamValueBytes:
			return overLimit("params."+clip(k), len(v), MaxParamValueBytes, "bytes", "a parameter names a record; it does not carry data")
		}
	}
	return nil
}

// checkDocument bounds a document's size before it is parsed.
func checkDocument(path string, data []byte) error {
	if len(data) > MaxDocumentBytes {
		return overLimit(path, len(data), MaxDocumentBytes, "bytes", "split the step or shorten the document")
	}
	return nil
}

// checkDepth bounds the nesting of a decoded document. The decoder has
// already refused anything past judge.MaxDepth while it read (tooDeep), so
// this walk recurses at most that deep.
func checkDepth(path string, tree any) error {
	if depthOver(tree, 1) {
		return deepDocument(path, "")
	}
	return nil
}

func deepDocument(path, where string) error {
	return &Error{Kind: Invalid, Path: path, Message: fmt.Sprintf("nests deeper than the limit of %d levels%s; flatten the document", MaxDocumentDepth, where)}
}

// tooDeep turns the decoder's refusal of a document nested past
// judge.MaxDepth into the document limit's own refusal (MaxDocumentDepth
// is the stricter), naming where the reader stopped; nil for any other
// error.
func tooDeep(path string, err error) error {
	ne, ok := errors.AsType[*jsondepth.Error](err)
	if !ok {
		return nil
	}
	where := ""
	switch {
	case ne.Line > 0:
		where = fmt.Sprintf(" (line %d)", ne.Line)
	case ne.Path != "":
		where = " (at " + clipMsg(ne.Path) + ")"
	}
	return deepDocument(path, where)
}

func depthOver(tree any, depth int) bool {
	if depth > MaxDocumentDepth {
		return true
	}
	switch t := tree.(type) {
	case map[string]any:
		for _, v := range t {
			if depthOver(v, depth+1) {
				return true
			}
		}
	case []any:
		for _, v := range t {
			if depthOver(v, depth+1) {
				return true
			}
		}
	}
	return false
}

// parseEffectsDoc decodes and loads an effects document within the limits.
func parseEffectsDoc(data []byte) ([]judge.Effect, error) {
	if err := checkDocument("effects", data); err != nil {
		return nil, err
	}
	tree, err := judge.DecodeDocument(data)
	if err != nil {
		if deep := tooDeep("effects", err); deep != nil {
			return nil, deep
		}
		return nil, &Error{Kind: Invalid, Code: judge.CodeInvalidContract, Path: "effects", Message: "cannot parse: " + clipMsg(err.Error())}
	}
	if err := checkDepth("effects", tree); err != nil {
		return nil, err
	}
	if list, ok := tree.([]any); ok && len(list) > MaxEffects {
		return nil, overLimit("effects", len(list), MaxEffects, "effects", "split the step into several steps")
	}
	list, err := judge.LoadEffects(tree, "effects")
	if err != nil {
		return nil, judgeError(err)
	}
	return list, nil
}
