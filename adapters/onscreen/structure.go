package onscreen

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/verifierd/verifierd/sdk"
)

// structureSource reads the selector fields off the page structure, as the
// screen shows them. Without a row selector each field is the one visible
// element its selector matches on the page (the count is returned, so that
// a screen showing two records is never read as one); with one, every
// visible row is read, each field the one visible element its selector
// matches inside the row (a hidden one, such as a draft cell, is not on
// the screen, nor is one styled invisible or fully transparent; the count
// is returned as well). An input or a textarea shows its value, a select its
// selected option (its text, and its value beside it); anything else its
// displayed text. A password input and a checkbox or radio button are never
// read.
const structureSource = `function (spec) {
  function visible(e) {
    if (e.getClientRects().length === 0) { return false; }
    if (typeof e.checkVisibility === "function") {
      return e.checkVisibility({opacityProperty: true, visibilityProperty: true, contentVisibilityAuto: true});
    }
    var st = window.getComputedStyle(e);
    return st.visibility !== "hidden" && st.visibility !== "collapse";
  }
  function shown(e) {
    var out = {found: true, count: 1, kind: "text", text: "", value: ""};
    var tag = e.tagName;
    if (tag === "INPUT") {
      var type = String(e.type || "").toLowerCase();
      if (type === "password") { out.kind = "password"; return out; }
      if (type === "checkbox" || type === "radio") { out.kind = "choice"; return out; }
      out.text = String(e.value);
    } else if (tag === "TEXTAREA") {
      out.text = String(e.value);
    } else if (tag === "SELECT") {
      var labels = [], values = [];
      for (var i = 0; i < e.options.length; i++) {
        if (e.options[i].selected) { labels.push(e.options[i].text); values.push(e.options[i].value); }
      }
      out.text = labels.join(", ");
      out.value = values.join(", ");
    } else {
      var t = e.innerText;
      out.text = typeof t === "string" ? t : (e.textContent || "");
    }
    return out;
  }
  function filter(list) { return Array.prototype.filter.call(list, visible); }
  try {
    var out = {path: location.pathname, rows: [], hidden: 0};
    if (spec.row) {
      var all = document.querySelectorAll(spec.row), rows = filter(all);
      out.hidden = all.length - rows.length;
      for (var r = 0; r < rows.length; r++) {
        var vals = [];
        for (var j = 0; j < spec.fields.length; j++) {
          var els = filter(rows[r].querySelectorAll(spec.fields[j]));
          if (els.length === 0) { vals.push({found: false}); continue; }
          var rv = shown(els[0]);
          rv.count = els.length;
          vals.push(rv);
        }
        out.rows.push(vals);
      }
      return out;
    }
    var one = [];
    for (var k = 0; k < spec.fields.length; k++) {
      var seen = filter(document.querySelectorAll(spec.fields[k]));
      if (seen.length === 0) { one.push({found: false}); continue; }
      var v = shown(seen[0]);
      v.count = seen.length;
      one.push(v);
    }
    out.rows.push(one);
    return out;
  } catch (err) {
    return {error: String(err && err.message || err)};
  }
}`

// shownValue is what the page shows at one field's selector.
type shownValue struct {
	Found bool   `json:"found"`
	Count int    `json:"count"` // visible elements the selector matches (on the page, or in the row)
	Kind  string `json:"kind"`  // text, password or choice
	Text  string `json:"text"`
	Value string `json:"value"` // a select's selected option's value
}

// structure is the page structure's reading: the page's address path and
// one row of field readings per record.
type structure struct {
	Error  string         `json:"error"`
	Path   string         `json:"path"`
	Rows   [][]shownValue `json:"rows"`
	Hidden int            `json:"hidden"` // rows the selector matches that are not on screen
}

// readStructure reads fields (all selector fields) off the page in ctx's
// tab, with s's row selector.
func readStructure(ctx context.Context, s *settings, fields []field) (structure, error) {
	spec := struct {
		Row    string   `json:"row"`
		Fields []string `json:"fields"`
	}{Row: s.rows, Fields: []string{}}
	for _, f := range fields {
		spec.Fields = append(spec.Fields, f.selector)
	}
	b, _ := json.Marshal(spec)
	pg, err := chromedp.Run(ctx, chromedp.Evaluate[structure]("("+structureSource+")("+string(b)+")"))
	switch {
	case err != nil:
		return structure{}, unusable("could not read the page structure: %s", errText(err))
	case pg.Error != "":
		return structure{}, unusable("the page could not evaluate a configured selector: %s", pg.Error)
	case s.rows == "" && len(pg.Rows) != 1:
		return structure{}, unusable("the page structure read %d records where one was expected", len(pg.Rows))
	}
	return pg, nil
}

// rowRecords are the records of a read over rows: one per visible row, each
// carrying the page's address path as its id. A screen that shows no row
// is unusable, never a read of no record: only absent_selector says that
// the record does not exist.
func rowRecords(s *settings, pg structure) (result, error) {
	if len(pg.Rows) == 0 {
		return result{}, unusable("no element on the screen matches row_selector %s (%d hidden); a screen without rows is not read as no record (at tier 3, absent_selector says the record does not exist)", s.rows, pg.Hidden)
	}
	res := result{raw: map[string]string{}}
	for i, row := range pg.Rows {
		rec := sdk.Record{"id": pg.Path}
		for j, f := range s.fields {
			shown, v, err := f.readShown(row[j], len(pg.Rows), i)
			if err != nil {
				return result{}, err
			}
			if i == 0 {
				res.raw[f.param] = shown
			}
			rec[f.param] = v
		}
		res.records = append(res.records, rec)
	}
	return res, nil
}

// readShown turns a field's reading into the text shown and its record
// value; row is its row's index of rows (rows 0 outside a row selector).
func (f field) readShown(v shownValue, rows, row int) (string, string, error) {
	where := "field " + f.param
	if rows > 0 {
		where = fmt.Sprintf("row %d of %d, field %s", row+1, rows, f.param)
	}
	switch {
	case !v.Found:
		return "", "", unusable("%s: the screen shows no element at its selector; every marked field must read back", where)
	case rows == 0 && v.Count > 1:
		return "", "", unusable("%s: its selector matches %d elements on the screen, so the screen may show more than one record; declare row_selector to read every row, or mark a selector that matches one element", where, v.Count)
	case v.Count > 1:
		return "", "", unusable("%s: its selector matches %d elements on the screen inside the row, so it is not known which one shows the record's value; give a selector that matches one element per row", where, v.Count)
	case v.Kind == "password":
		return "", "", unusable("%s: the element is a password input, which is never read; mark another element", where)
	case v.Kind == "choice":
		return "", "", unusable("%s: the element is a checkbox or a radio button, which shows a state, not a text; mark its label", where)
	}
	text := collapse(v.Text)
	if text == "" {
		return "", "", unusable("%s: the page shows no text at its selector; every marked field must read back", where)
	}
	value := valueOf(f, text)
	if value != f.expected && v.Value != "" && normalize(v.Value) == normalize(f.expected) {
		// A select shows its option's text; the option's value is the
		// run's value.
		value = f.expected
	}
	return text, value, nil
}

// renderedSource tells whether the page has rendered what a read reads:
// the document parsed, ready_selector shown (when declared) and, with a
// row selector, a visible row or a visible absent_selector (the list's
// empty state). It answers "wait" until then.
const renderedSource = `function (spec) {
  function visible(e) {
    if (!e || e.getClientRects().length === 0) { return false; }
    if (typeof e.checkVisibility === "function") {
      return e.checkVisibility({opacityProperty: true, visibilityProperty: true, contentVisibilityAuto: true});
    }
    var st = window.getComputedStyle(e);
    return st.visibility !== "hidden" && st.visibility !== "collapse";
  }
  try {
    if (document.readyState === "loading") { return "wait"; }
    if (spec.ready && !document.querySelector(spec.ready)) { return "wait"; }
    if (!spec.row) { return "ready"; }
    if (Array.prototype.some.call(document.querySelectorAll(spec.row), visible)) { return "rows"; }
    if (spec.absent && visible(document.querySelector(spec.absent))) { return "absent"; }
    return "wait";
  } catch (err) {
    return "error: " + String(err && err.message || err);
  }
}`

// awaitRendered waits, within navigation_timeout_s and ctx, until the page
// has rendered what the read reads (renderedSource), and reports whether
// it shows absent_selector instead of rows. A list an application fills
// after the page appears has no rows at the first look; a page that shows
// neither rows nor its empty state in time is unusable, never read as no
// record.
func awaitRendered(ctx context.Context, s *settings) (absent bool, err error) {
	if s.ready == "" && s.rows == "" {
		return false, nil
	}
	spec, _ := json.Marshal(struct {
		Ready  string `json:"ready"`
		Row    string `json:"row"`
		Absent string `json:"absent"`
	}{s.ready, s.rows, s.absent})
	expr := "(" + renderedSource + ")(" + string(spec) + ")"
	wctx, cancel := context.WithTimeout(ctx, s.navTimeout)
	defer cancel()
	for {
		state, err := chromedp.Run(wctx, chromedp.Evaluate[string](expr))
		switch {
		case err == nil && state == "absent":
			return true, nil
		case err == nil && strings.HasPrefix(state, "error: "):
			return false, unusable("the page could not evaluate a configured selector: %s", strings.TrimPrefix(state, "error: "))
		case err == nil && state != "wait":
			return false, nil
		}
		// An error here is most often the page between two documents.
		select {
		case <-wctx.Done():
			return false, unusable("%s", s.neverRendered(ctx.Err() != nil))
		case <-time.After(pollInterval):
		}
	}
}

// neverRendered is the reason of a page awaitRendered waited for in vain
// (deadline: the read's deadline passed, not navigation_timeout_s).
func (s *settings) neverRendered(deadline bool) string {
	within := fmt.Sprintf("within navigation_timeout_s (%v)", s.navTimeout)
	if deadline {
		within = "before the read's deadline"
	}
	if s.rows == "" {
		return fmt.Sprintf("the page never showed ready_selector %s %s; it is not read before it has rendered", s.ready, within)
	}
	empty := "and no absent_selector is declared to show an empty list (a screen without rows is never read as no record)"
	if s.absent != "" {
		empty = "nor its empty state (absent_selector " + s.absent + ")"
	}
	what := "rows (row_selector " + s.rows + ")"
	if s.ready != "" {
		what = "ready_selector " + s.ready + " and then rows (row_selector " + s.rows + ")"
	}
	return fmt.Sprintf("the screen never showed %s %s %s; it may not have rendered them yet, or its structure changed, so it is not read as a screen of no record", what, empty, within)
}
