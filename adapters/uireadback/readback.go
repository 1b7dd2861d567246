package uireadback

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/verifierd/verifierd/adapters/internal/cdpguard"
	"github.com/verifierd/verifierd/sdk"
)

// pollInterval is how often a wait looks at the page again.
const pollInterval = 10 * time.Millisecond

// readback is one read of the record page: a fresh browser context, the
// sign-in, the record page, the identity check and the rows. It is used
// once.
type readback struct {
	s      *settings
	policy *policy
	*cdpguard.Guards

	// The guards can be switched off one at a time by the package's tests,
	// to show that each one alone stops a write.
	noPageGuard, noNetworkGuard bool
}

// readResult is what a read-back saw. A non-empty unusable says why the
// page could not be read as a record page; records are then meaningless.
type readResult struct {
	unusable string
	// rejected: the application rejected the read-back account's
	// credential and the gate holds it (sign_in.max_attempts reached, now
	// or earlier in the hold): sdk.CodeAccessRejected.
	rejected bool
	records  []sdk.Record
	at       time.Time
}

func newReadback(s *settings) *readback {
	rb := &readback{s: s, policy: newPolicy(s)}
	rb.Guards = cdpguard.NewGuards(rb.policy.allows, 0)
	return rb
}

// failure is a step that could not finish.
type failure struct {
	reason string
	// rejected: the application rejected the read-back account's
	// credential (the sign-in form came back). refusal: the reason is a
	// request the guards refused.
	rejected, refusal bool
	// held: rejected, and the sign-in gate now holds the credential.
	held bool
}

func (f *failure) Error() string { return f.reason }

func unusable(format string, args ...any) error {
	return &failure{reason: fmt.Sprintf(format, args...)}
}

// isFailure reports whether err is a failure that test says is of a kind.
func isFailure(err error, test func(*failure) bool) bool {
	f, ok := errors.AsType[*failure](err)
	return ok && test(f)
}

// read runs the read-back in tab, which it owns and disposes of. ctx
// bounds it, and so does deadline.
func (rb *readback) read(ctx context.Context, t *tab, deadline time.Time) readResult {
	log := sdk.Logger(ctx)
	listen := rb.Listen
	t.listener.Store(&listen)
	defer t.dispose(rb.Network, func(err error) {
		log.Warn("ui_readback: the read-back's tab did not close cleanly", "error", err.Error())
	})
	// The network guard answers for the life of the tab, not of the read
	// (cdpguard.Network).
	go rb.Network.Answer(t.ctx)
	readCtx, cancel := context.WithDeadline(t.ctx, deadline)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()

	res := readResult{}
	err := t.wait(readCtx)
	if err != nil {
		if readCtx.Err() != nil {
			err = unusable("timed out opening a fresh browser context")
		} else {
			err = unusable("the browser failed while opening a fresh browser context: %v", err)
		}
	} else {
		err = rb.steps(readCtx, &res)
	}
	// The read ends only once every request paused during it has been
	// answered, the refused ones failed.
	if derr := rb.Network.EndRead(ctx); derr != nil {
		log.Warn("ui_readback: a request the guards refused may not have been failed", "error", derr.Error())
		if err == nil {
			err = unusable("%v", derr)
		}
	}
	if rerr := rb.refusalError(); rerr != nil && !isFailure(err, func(f *failure) bool { return f.refusal }) {
		// A refused request explains a wait that then timed out, and one
		// refused after the rows were read still means the page tried to
		// write while it was being read.
		err = rerr
	}
	if err != nil {
		if _, ok := errors.AsType[*failure](err); !ok {
			err = unusable("the browser failed during the read-back: %v", err)
		}
		return readResult{unusable: err.Error(), at: time.Now(), rejected: isFailure(err, func(f *failure) bool { return f.held })}
	}
	return res
}

func (rb *readback) refusalError() error {
	what := rb.Refused.Summary()
	if what == "" {
		return nil
	}
	return &failure{refusal: true, reason: fmt.Sprintf("the record page attempted a non-read request: %s; a read-back that had to refuse a write is not a clean read of the record page", what)}
}

// signInRefusal is the reason of a sign-in during which the guards refused
// a request (nil when they refused none): the refusal, which explains a
// sign-in that then failed or timed out (signErr), and what to change when
// the refused request is a POST to another URL than sign_in.url.
func (rb *readback) signInRefusal(signErr error) error {
	what := rb.Refused.Summary()
	if what == "" {
		return nil
	}
	reason := "the read-only guards refused a request while signing in: " + what
	if signErr != nil {
		reason = "signing in did not finish because the read-only guards refused a request: " + what
		if strings.Contains(signErr.Error(), "timed out") {
			reason += " (the wait for signed_in_selector then timed out: the refusal is why)"
		}
	}
	for _, r := range rb.Refused.Snapshot() {
		if strings.EqualFold(r.Method, "POST") && r.Target != "" && r.Target != rb.policy.signInPost {
			reason += fmt.Sprintf("; the only POST a sign-in may make is to sign_in.url (%s): if the sign-in form posts to %s, write that URL as sign_in.url", rb.policy.signInPost, r.Target)
			break
		}
	}
	return &failure{refusal: true, reason: reason}
}

// steps runs the read-back proper.
func (rb *readback) steps(ctx context.Context, res *readResult) error {
	var script page.ScriptIdentifier
	err := rb.timed(ctx, "installing the read-only guards", func(ctx context.Context) error {
		return chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			var err error
			script, err = rb.Install(ctx, t, cdpguard.Setup{
				AllowedPosts:        rb.policy.allowedPosts(),
				BypassServiceWorker: true,
				NoPageGuard:         rb.noPageGuard,
				NoNetworkGuard:      rb.noNetworkGuard,
			})
			return err
		}))
	})
	if err != nil {
		return err
	}

	err = rb.signIn(ctx)
	if rerr := rb.signInRefusal(err); rerr != nil {
		return rerr
	}
	switch {
	case isFailure(err, func(f *failure) bool { return f.rejected }):
		if rb.s.gate.reject() {
			f, _ := errors.AsType[*failure](err)
			f.held = true
			f.reason += fmt.Sprintf("; it is not tried again for %v (sign_in.max_attempts is %d), so that the application does not lock the account: restore the account's access", rb.s.gate.hold, rb.s.gate.maxAttempts)
		}
		return err
	case err != nil:
		return err
	}
	rb.s.gate.succeeded()

	// From here on, not even the sign-in page may be posted to.
	rb.policy.phase.Store(phaseRead)
	err = rb.timed(ctx, "switching the page guard to the read phase", func(ctx context.Context) error {
		return chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			if rb.noPageGuard {
				return nil
			}
			if _, err := cdp.Call(ctx, t, page.RemoveScriptToEvaluateOnNewDocument, page.RemoveScriptToEvaluateOnNewDocumentParams{Identifier: script}); err != nil {
				return err
			}
			_, err := rb.PageGuard(ctx, t, rb.policy.allowedPosts())
			return err
		}))
	})
	if err != nil {
		return err
	}

	if err := rb.openRecord(ctx); err != nil {
		return err
	}
	if err := rb.awaitList(ctx); err != nil {
		return err
	}
	if err := rb.refusalError(); err != nil {
		return err
	}
	return rb.extract(ctx, res)
}

// timed runs one step under navigation_timeout_s (and the read's deadline)
// and turns a timeout or a browser error into a reason.
func (rb *readback) timed(ctx context.Context, what string, f func(ctx context.Context) error) error {
	sctx, cancel := context.WithTimeout(ctx, rb.s.navTimeout)
	defer cancel()
	start := time.Now()
	err := f(sctx)
	if err == nil {
		return nil
	}
	var fl *failure
	switch {
	case errors.As(err, &fl):
		return err
	case sctx.Err() != nil && ctx.Err() == nil:
		return unusable("timed out after %v %s (navigation_timeout_s is %v)", time.Since(start).Round(time.Millisecond), what, rb.s.navTimeout)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return unusable("timed out after %v %s: the effect's deadline passed", time.Since(start).Round(time.Millisecond), what)
	case ctx.Err() != nil:
		return unusable("the read-back was cancelled while %s", what)
	}
	if le, ok := errors.AsType[*chromedp.LoadError](err); ok {
		return unusable("%s failed: %s", what, le.ErrorText)
	}
	return unusable("the browser failed while %s: %v", what, err)
}

// poll evaluates expr in the page until it returns something other than
// "wait", and returns that. A page between two documents cannot be
// evaluated for a moment; that counts as "wait". A script exception (an
// invalid selector) ends the wait.
func poll(ctx context.Context, expr string) (string, error) {
	for {
		state, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		var ex *chromedp.ExceptionError
		switch {
		case errors.As(err, &ex):
			return "", unusable("the page could not evaluate the configured selectors: %s", exceptionText(ex))
		case err == nil && state != "wait":
			return state, nil
		}
		t := time.NewTimer(pollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", ctx.Err()
		case <-t.C:
		}
	}
}

func exceptionText(ex *chromedp.ExceptionError) string {
	if d := ex.ExceptionDetails; d != nil && d.Exception != nil && d.Exception.Description != "" {
		first, _, _ := strings.Cut(d.Exception.Description, "\n")
		return first
	}
	return ex.Error()
}

// js quotes s as a JavaScript string literal.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// signIn signs in with the read-back account. The credentials go to the
// page through Input.insertText, never inside a script, so they appear in no
// evaluated source and no log.
func (rb *readback) signIn(ctx context.Context) error {
	si := rb.s.signIn
	err := rb.timed(ctx, "opening the sign-in page", func(ctx context.Context) error {
		resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(si.url))
		if err != nil {
			return err
		}
		if resp != nil && resp.Status >= 400 {
			return unusable("the sign-in page answered HTTP %d", resp.Status)
		}
		_, err = poll(ctx, fmt.Sprintf(`(function () {
			return document.querySelector(%s) && document.querySelector(%s) && document.querySelector(%s) ? "form" : "wait";
		})()`, js(si.usernameSelector), js(si.passwordSelector), js(si.submitSelector)))
		return err
	})
	if err != nil {
		return err
	}
	err = rb.timed(ctx, "filling in the sign-in form", func(ctx context.Context) error {
		for _, f := range []struct{ sel, value string }{{si.usernameSelector, si.username}, {si.passwordSelector, si.password}} {
			focused, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`(function () {
				var e = document.querySelector(%s);
				if (!e) { return false; }
				e.focus();
				if ("value" in e) { e.value = ""; }
				return document.activeElement === e;
			})()`, js(f.sel))))
			if err != nil {
				return err
			}
			if !focused {
				return unusable("the sign-in field %s cannot take the focus", f.sel)
			}
			if err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
				_, err := cdp.Call(ctx, t, input.InsertText, input.InsertTextParams{Text: f.value})
				return err
			})); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return rb.timed(ctx, "signing in (waiting for signed_in_selector)", func(ctx context.Context) error {
		// timeOrigin tells the document the form was on from the one the
		// submission leads to.
		before, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`(function () {
			var b = document.querySelector(`+js(si.submitSelector)+`);
			var t = performance.timeOrigin;
			if (b) { b.click(); }
			return t;
		})()`))
		if err != nil {
			return err
		}
		state, err := poll(ctx, fmt.Sprintf(`(function () {
			if (document.querySelector(%s)) { return "in"; }
			if (performance.timeOrigin !== %s && document.readyState === "complete" && document.querySelector(%s)) { return "form"; }
			return "wait";
		})()`, js(si.signedInSelector), strconv.FormatFloat(before, 'g', -1, 64), js(si.passwordSelector)))
		if err != nil {
			return err
		}
		if state != "in" {
			return &failure{rejected: true, reason: fmt.Sprintf("the sign-in failed: the sign-in form came back and %s never appeared (is the read-back account's user name or password wrong, or the account locked?)", si.signedInSelector)}
		}
		return nil
	})
}

// openRecord opens the record page and waits until it is ready.
func (rb *readback) openRecord(ctx context.Context) error {
	s := rb.s
	return rb.timed(ctx, "waiting for the record page", func(ctx context.Context) error {
		resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(s.recordURL))
		if err != nil {
			return err
		}
		notFound := "false"
		if s.notFoundSelector != "" {
			notFound = "!!document.querySelector(" + js(s.notFoundSelector) + ")"
		}
		state, err := poll(ctx, fmt.Sprintf(`(function () {
			if (%s) { return "notfound"; }
			if (document.querySelector(%s)) { return "ready"; }
			if (document.readyState === "complete" && document.querySelector(%s) && !document.querySelector(%s)) { return "signin"; }
			return "wait";
		})()`, notFound, js(s.readySelector), js(s.signIn.passwordSelector), js(s.signIn.signedInSelector)))
		switch {
		case err != nil && resp != nil && resp.Status >= 400:
			return unusable("the record page answered HTTP %d", resp.Status)
		case err != nil:
			return err
		case state == "notfound":
			return unusable("the record page says the record does not exist (not_found_selector %s is shown)", s.notFoundSelector)
		case state == "signin":
			return unusable("the record page sent the read-back to the sign-in form again: the read-back account's session did not hold")
		case resp != nil && resp.Status >= 400:
			return unusable("the record page answered HTTP %d", resp.Status)
		}
		return nil
	})
}

// awaitList waits, once ready_selector is shown, until the document has
// been parsed and the page shows its rows (row_selector) or its empty
// state (empty_selector, displayed): a list an application fills after
// the page appears has no rows at the first look, and read then it would
// look empty. A page that shows neither before navigation_timeout_s (or
// the read's deadline) is unusable, never a read of no records.
func (rb *readback) awaitList(ctx context.Context) error {
	s := rb.s
	empty := "false"
	if s.emptySelector != "" {
		empty = "(function (e) { return !!e && e.getClientRects().length > 0; })(document.querySelector(" + js(s.emptySelector) + "))"
	}
	expr := fmt.Sprintf(`(function () {
		if (document.readyState === "loading") { return "wait"; }
		if (document.querySelector(%s)) { return "rows"; }
		if (%s) { return "empty"; }
		return "wait";
	})()`, js(s.rowSelector), empty)
	return rb.timed(ctx, "waiting for the record page's rows or its empty state", func(ctx context.Context) error {
		_, err := poll(ctx, expr)
		if err == nil || ctx.Err() == nil {
			return err
		}
		return unusable("the record page never showed rows nor its empty state: %s; it may not have rendered them yet, or it no longer has the structure the configuration describes (a redesign?), so it is not read as a page of no records", rb.listSelectors())
	})
}

// listSelectors names what awaitList waited for.
func (rb *readback) listSelectors() string {
	s := rb.s
	if s.emptySelector == "" {
		return fmt.Sprintf("no element matches row_selector %s, and no empty_selector is configured, so an empty record page cannot be told from one that has not rendered its rows; declare empty_selector", s.rowSelector)
	}
	return fmt.Sprintf("neither row_selector %s nor a displayed empty_selector %s matched within navigation_timeout_s (%v) and the read's deadline", s.rowSelector, s.emptySelector, s.navTimeout)
}

// extracted is what the extraction script returns.
type extracted struct {
	Error    string `json:"error"`
	Identity struct {
		Found bool    `json:"found"`
		Value *string `json:"value"`
	} `json:"identity"`
	Empty bool              `json:"empty"`
	Rows  [][]*fieldReading `json:"rows"`
}

type fieldReading struct {
	Text  string  `json:"t"`
	Attr  *string `json:"a"`
	Title *string `json:"title"`
	// More are the readings of the other elements the field's selector
	// matches in the row, after the first: a row that shows a field
	// several times.
	More []*fieldReading `json:"more"`
}

// extractSource reads the identifier, the empty-state element and every
// row's fields straight from the DOM. It runs in an isolated world, where
// the page's own scripts cannot have replaced the DOM methods it uses.
const extractSource = `function (spec) {
  function text(el) {
    var t = el.innerText;
    return typeof t === "string" ? t : (el.textContent || "");
  }
  var out = {identity: {found: false}, empty: false, rows: []};
  try {
    var id = document.querySelector(spec.identity.selector);
    if (id) {
      out.identity.found = true;
      out.identity.value = spec.identity.attribute ? id.getAttribute(spec.identity.attribute) : text(id);
    }
    if (spec.empty) {
      var e = document.querySelector(spec.empty);
      out.empty = !!e && e.getClientRects().length > 0;
    }
    var rows = document.querySelectorAll(spec.row);
    for (var i = 0; i < rows.length; i++) {
      var vals = [];
      for (var j = 0; j < spec.fields.length; j++) {
        var f = spec.fields[j];
        var els = f.selector ? rows[i].querySelectorAll(f.selector) : [rows[i]];
        if (els.length === 0) { vals.push(null); continue; }
        var read = [];
        for (var k = 0; k < els.length; k++) {
          read.push(f.attribute ? {a: els[k].getAttribute(f.attribute)} : {t: text(els[k]), title: els[k].getAttribute("title")});
        }
        read[0].more = read.slice(1);
        vals.push(read[0]);
      }
      out.rows.push(vals);
    }
  } catch (err) {
    return {error: String(err && err.message || err)};
  }
  return out;
}`

func (rb *readback) extract(ctx context.Context, res *readResult) error {
	s := rb.s
	type fieldSpec struct {
		Selector  string `json:"selector"`
		Attribute string `json:"attribute"`
	}
	spec := struct {
		Identity fieldSpec   `json:"identity"`
		Row      string      `json:"row"`
		Empty    string      `json:"empty"`
		Fields   []fieldSpec `json:"fields"`
	}{Identity: fieldSpec{s.identity.selector, s.identity.attribute}, Row: s.rowSelector, Empty: s.emptySelector}
	for _, f := range s.fields {
		spec.Fields = append(spec.Fields, fieldSpec{f.selector, f.attribute})
	}
	specJSON, _ := json.Marshal(spec)

	var pg extracted
	err := rb.timed(ctx, "reading the record page", func(ctx context.Context) error {
		return chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			world, err := cdp.Call(ctx, t, page.CreateIsolatedWorld, page.CreateIsolatedWorldParams{FrameID: cdp.FrameID(t.TargetID), WorldName: "verifierd-readback"})
			if err != nil {
				return err
			}
			r, err := cdp.Call(ctx, t, runtime.Evaluate, runtime.EvaluateParams{
				Expression:    "(" + extractSource + ")(" + string(specJSON) + ")",
				ContextID:     world.ExecutionContextID,
				ReturnByValue: new(true),
			})
			if err != nil {
				return err
			}
			if r.ExceptionDetails != nil {
				return unusable("reading the record page raised %s", exceptionText(&chromedp.ExceptionError{ExceptionDetails: r.ExceptionDetails}))
			}
			return json.Unmarshal(r.Result.Value, &pg)
		}))
	})
	if err != nil {
		return err
	}
	res.at = time.Now()
	if pg.Error != "" {
		return unusable("the page could not evaluate the configured selectors: %s", pg.Error)
	}
	ident, err := rb.checkIdentity(pg)
	if err != nil {
		return err
	}
	if len(pg.Rows) == 0 {
		switch {
		case pg.Empty:
			return nil
		case s.emptySelector == "":
			return unusable("no element matches row_selector %s and no empty_selector is configured, so an empty record page cannot be told from one whose structure changed; declare empty_selector", s.rowSelector)
		default:
			return unusable("neither row_selector %s nor empty_selector %s matches: the record page no longer has the structure the configuration describes (a redesign?)", s.rowSelector, s.emptySelector)
		}
	}
	if pg.Empty {
		return unusable("the record page shows %d rows and its empty-state element (%s) at once; its structure is not what the configuration describes", len(pg.Rows), s.emptySelector)
	}
	if s.foldedIdentity != "" && len(pg.Rows) > 1 {
		// Identifiers that differ only in case are different records;
		// folded, a row lost beside one added would read as the same.
		return unusable("the contracts identify records by field %s, which is casefolded (fields.%s.casefold): records whose identifiers differ only in case would merge and a lost row would be hidden; remove casefold from it or set the contracts' identity_field to another field", s.foldedIdentity, s.foldedIdentity)
	}
	if s.idIsIdentity && len(pg.Rows) > 1 {
		// Every row would carry the page's one identifier as the field the
		// judge tells records apart by: a row lost beside a row added
		// would look like the same record.
		return unusable("the record page shows %d rows, and the contracts identify records by %s, which every row takes from the page's identity.reader; rows cannot be told apart (a lost row would be hidden): set the contracts' identity_field to a field each row has", len(pg.Rows), s.identity.field)
	}
	spelled := make([]map[string][]string, len(s.fields))
	for j, f := range s.fields {
		spelled[j] = s.spell.candidates(f.expected)
	}
	if s.identity.field != "" {
		ident = s.spell.of(s.identity.field, ident, collapseSpace, s.spell.candidates(collapseSpace, s.identity.raw))
	}
	res.records = make([]sdk.Record, 0, len(pg.Rows))
	for i, row := range pg.Rows {
		rec := make(sdk.Record, len(s.fields)+1)
		for j, f := range s.fields {
			v, err := s.shape(f, row[j], fmt.Sprintf("row %d of %d", i+1, len(pg.Rows)))
			if err != nil {
				return unusable("%v", err)
			}
			if one, ok := v.(string); ok {
				v = s.spell.of(f.name, one, f.expected, spelled[j])
			}
			rec[f.name] = v
		}
		if s.identity.field != "" {
			rec[s.identity.field] = ident
		}
		res.records = append(res.records, rec)
	}
	return nil
}

// checkIdentity checks that the page shows the record this run reads. The
// identifiers are not quoted in the reason; they may be personal data.
func (rb *readback) checkIdentity(p extracted) (string, error) {
	s := rb.s
	where := s.identity.selector
	if s.identity.attribute != "" {
		where += " (attribute " + s.identity.attribute + ")"
	}
	if !p.Identity.Found {
		return "", unusable("no readable identifier: identity.reader %s matches nothing on the record page", s.identity.selector)
	}
	if p.Identity.Value == nil || collapseSpace(*p.Identity.Value) == "" {
		return "", unusable("no readable identifier: identity.reader %s is empty on the record page", where)
	}
	got := collapseSpace(*p.Identity.Value)
	if got != s.identity.value {
		return "", unusable("the page is another record's: identity.reader %s shows an identifier other than identity.value", where)
	}
	return got, nil
}

// shape is one field of one row (where names the row) as its record value:
// the one element's value (readAs), or, when the field's selector matches
// several elements in the row, a list of their values for a field no
// contract of the read looks at and a *sdk.ShapeError for one a contract
// reads: the row holds several values of it, and reading the first would
// hide the others.
func (s *settings) shape(f field, r *fieldReading, where string) (any, error) {
	checked := s.checks(f.name)
	if r == nil || len(r.More) == 0 {
		v, err := f.readAs(r, checked)
		if err != nil {
			return nil, &sdk.ShapeError{Record: where, Field: f.name, Reason: err.Error()}
		}
		return v, nil
	}
	if checked {
		return nil, &sdk.ShapeError{Record: where, Field: f.name, Reason: fmt.Sprintf(
			"its selector %s matches %d elements in the row, so the row shows several values of a field a contract reads; "+
				"narrow the selector to the one element that holds the value", f.selector, len(r.More)+1)}
	}
	values := make([]any, 0, len(r.More)+1)
	for _, e := range append([]*fieldReading{r}, r.More...) {
		v, err := f.readAs(e, false)
		if err != nil {
			return nil, &sdk.ShapeError{Record: where, Field: f.name, Reason: err.Error()}
		}
		values = append(values, v)
	}
	return values, nil
}

// read turns one field's reading into its record value: whitespace
// collapsed, refused when shortened, then date_format and casefold.
func (f field) read(r *fieldReading) (string, error) { return f.readAs(r, true) }

// readAs is read, with the checks that protect only this field's value
// (a title that holds more than is shown, truncation markers, a date that
// does not parse with date_format) made only when checked: a field no
// contract of the read looks at (settings.checks) is reported as shown,
// since nothing judged depends on it.
func (f field) readAs(r *fieldReading, checked bool) (string, error) {
	if r == nil {
		return "", fmt.Errorf("%s matches nothing in the row; the record page no longer has the structure the configuration describes", f.selector)
	}
	var v string
	if f.attribute != "" {
		if r.Attr == nil {
			return "", fmt.Errorf("the element has no %s attribute", f.attribute)
		}
		// An attribute is not rendered: a run of spaces in it is the
		// value's own (f.space).
		v = f.space(*r.Attr)
	} else {
		v = collapseSpace(r.Text)
		if checked && r.Title != nil {
			// A title that starts with the shown text and goes on is the
			// whole value; the page shows only its beginning.
			if title := collapseSpace(*r.Title); title != v && strings.HasPrefix(title, v) {
				return "", errors.New("the page shows a shortened value (its title attribute holds a longer one); read the field from attribute: title")
			}
		}
	}
	for _, m := range f.markers {
		if checked && strings.Contains(v, m) {
			return "", fmt.Errorf("the value contains the truncation marker %q and a contract of this read looks at the field, so the page may show it shortened; read the full value from an attribute, or narrow truncation_markers", m)
		}
	}
	if f.layout != "" {
		t, err := time.Parse(f.layout, v)
		switch {
		case err == nil:
			v = t.Format(f.isoLayout)
		case checked:
			return "", fmt.Errorf("the value does not parse with date_format")
		}
	}
	if f.casefold {
		v = strings.ToLower(v)
	}
	return v, nil
}

// space is the whitespace normalisation of the field's values: a value
// shown on the page is rendered, so its runs of whitespace are collapsed
// (collapseSpace); an attribute's value is not, so it is only trimmed.
func (f field) space(s string) string {
	if f.attribute != "" {
		return strings.TrimSpace(s)
	}
	return collapseSpace(s)
}

// expected is a contract's value for the field normalised as a value read
// is: whitespace collapsed (trimmed only for an attribute), parsed with date_format into ISO 8601 when it
// parses (a value already in ISO form stays as it is, also when
// date_format would read it as another date: under %Y-%d-%m, 2031-04-03
// is 3 April, as ISO says), and casefolded.
func (f field) expected(e string) string {
	v := f.space(e)
	if f.layout != "" {
		// A value already in ISO 8601 is the contracts' own spelling of a
		// date: it is never read with date_format.
		if _, err := time.Parse(f.isoLayout, v); err != nil {
			if t, err := time.Parse(f.layout, v); err == nil {
				v = t.Format(f.isoLayout)
			}
		}
	}
	if f.casefold {
		v = strings.ToLower(v)
	}
	return v
}
