package session

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/verifierd/verifierd/judge"
)

// Evidence that cannot leak what redaction hides (docs/daemon.md): under a
// deployment's redaction policy the daemon keys the hidden values of every
// baseline it stores, keys the record digests of reconciliation tasks, and
// passes adapter-supplied text through the same policy as records before it
// reaches a verdict, a stored result or a log line.

// evidence is the Manager's evidence keys: Options.EvidenceKey, or without
// one a random key made by New.
func (m *Manager) evidence() evidenceKeys { return m.keys }

// baselineKeyer rewrites raw baseline records with their hidden values
// keyed as Begin streams them into the store. It remembers the tokens it
// made (up to maxMaskTokens), so that an adapter error part-way through the
// read can be masked too: its records are nowhere in clear any more.
type baselineKeyer struct {
	p        judge.Redaction
	k        *judge.Keyer
	tokens   map[string]bool
	overflow bool
}

// maxMaskTokens bounds the tokens a baselineKeyer remembers; past it, an
// error part-way through the read is withheld rather than searched.
const maxMaskTokens = 1 << 16

// newBaselineKeyer returns nil when the policy hides nothing.
func (e evidenceKeys) newBaselineKeyer(p judge.Redaction) *baselineKeyer {
	if !p.Active() {
		return nil
	}
	return &baselineKeyer{p: p, k: judge.NewKeyer(e.key()), tokens: map[string]bool{}}
}

func (bk *baselineKeyer) key(raw []byte) ([]byte, error) {
	r, err := decodeRecord(raw)
	if err != nil {
		return nil, fmt.Errorf("a baseline record is not a JSON object: %w", err)
	}
	keyed := bk.p.KeyBaseline(bk.k, r)
	if !bk.overflow {
		for t := range bk.p.Tokens([]judge.Record{keyed}) {
			bk.tokens[t] = true
		}
		bk.overflow = len(bk.tokens) > maxMaskTokens
	}
	return json.Marshal(keyed)
}

// maskErr masks the hidden values of the records read so far in err.
func (bk *baselineKeyer) maskErr(err error) error {
	if bk == nil || err == nil {
		return err
	}
	if bk.overflow {
		return errors.New("the baseline read failed part-way; the adapter's message is withheld because it may quote a hidden value (see the adapter's log)")
	}
	return errors.New(judge.RedactKeyedText(bk.k, err.Error(), bk.tokens))
}

// keyedBaseline turns a stored baseline into the judge's view of it; its
// Keyer remembers tokens across the reads of one settlement. A
// baseline keyed with another key (a data dir copied without its keys
// folder) cannot be restored, so it counts as unreadable: the contracts that
// need it become INDETERMINATE, never a guess. A keyed baseline is judged
// in map form (restoring hidden values works on maps); every other one in
// compact form.
type keyedBaseline struct {
	base   *read // as stored: hidden values keyed
	keyed  bool
	policy judge.Redaction
	keyer  *judge.Keyer
	group  []*judge.Contract
	// secrets masks the candidate's secret values in adapter text.
	secrets secretMask
}

func (e evidenceKeys) newKeyedBaseline(cm captureMeta, stored *read, p judge.Redaction, group []*judge.Contract) keyedBaseline {
	kb := keyedBaseline{base: stored, policy: p, keyer: judge.NewKeyer(e.key()), group: group}
	if cm.KeyID == "" || !stored.reachable() {
		return kb
	}
	if cm.KeyID != judge.KeyID(e.key()) {
		kb.base = unreachableRead("the stored baseline was keyed with another evidence key; restore keys/evidence-hmac.key of this data dir")
		return kb
	}
	kb.keyed = true
	return kb
}

// against returns the baseline to judge an after read against, in map
// form.
func (kb keyedBaseline) against(after *read) judge.Snapshot {
	out := kb.base.snapshot()
	if !kb.keyed {
		return out
	}
	out.Records = kb.policy.NewRestorer(kb.keyer, kb.group, after.records()).Restore(out.Records)
	return out
}

// redactText masks hidden values in adapter-supplied text, given the reads
// the verdict is about.
func (kb keyedBaseline) redactText(text string, after *read) string {
	text = kb.secrets.text(text)
	if text == "" || !kb.policy.Active() {
		return text
	}
	if kb.base.projected() || after.projected() {
		// Never so (group.projection): a read kept in part cannot show
		// every hidden value to mask.
		return "the adapter's message is withheld: the reads it may quote were not kept whole"
	}
	text = kb.policy.RedactText(text, kb.group, kb.against(after).Records, after.records())
	if kb.keyed {
		// Baseline values read nowhere after the action are known only by
		// their token.
		text = judge.RedactKeyedText(kb.keyer, text, kb.policy.Tokens(kb.base.records()))
	}
	return text
}

// groupOf lists the contracts of the given effects.
func groupOf(contracts []*judge.Contract, effects []int) []*judge.Contract {
	out := make([]*judge.Contract, len(effects))
	for k, i := range effects {
		out[k] = contracts[i]
	}
	return out
}
