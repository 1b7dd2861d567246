package onscreen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/verifierd/verifierd/internal/testservers/screenapp"
	"github.com/verifierd/verifierd/sdk"
)

// accuracyValues are the values of the OCR measurement: 20 names, dates and
// amounts, each painted in three fonts.
var accuracyValues = []screenapp.Record{
	{Name: "Ada Lovelace", Born: "1815-12-10", Amount: "1,204.50"},
	{Name: "Grace Hopper", Born: "1906-12-09", Amount: "87.00"},
	{Name: "Alan Turing", Born: "1912-06-23", Amount: "12,345.67"},
	{Name: "Katherine Johnson", Born: "1918-08-26", Amount: "0.99"},
	{Name: "Edsger Dijkstra", Born: "1930-05-11", Amount: "250.10"},
	{Name: "Barbara Liskov", Born: "1939-11-07", Amount: "3,000.00"},
	{Name: "Donald Knuth", Born: "1938-01-10", Amount: "64.25"},
	{Name: "Margaret Hamilton", Born: "1936-08-17", Amount: "9,876.54"},
	{Name: "Claude Shannon", Born: "1916-04-30", Amount: "432.10"},
	{Name: "Frances Allen", Born: "1932-08-04", Amount: "18.75"},
	{Name: "John McCarthy", Born: "1927-09-04", Amount: "5,500.00"},
	{Name: "Radia Perlman", Born: "1951-12-18", Amount: "71.30"},
	{Name: "Tim Berners-Lee", Born: "1955-06-08", Amount: "1,999.99"},
	{Name: "Hedy Lamarr", Born: "1914-11-09", Amount: "320.45"},
	{Name: "Niklaus Wirth", Born: "1934-02-15", Amount: "2,048.00"},
	{Name: "Sophie Wilson", Born: "1957-06-01", Amount: "6.50"},
	{Name: "Ken Thompson", Born: "1943-02-04", Amount: "11,111.11"},
	{Name: "Jean Sammet", Born: "1928-03-23", Amount: "845.20"},
	{Name: "Dennis Ritchie", Born: "1941-09-09", Amount: "77.77"},
	{Name: "Annie Easley", Born: "1933-04-23", Amount: "13,579.02"},
}

var accuracyFonts = []string{"sans", "serif", "mono"}

// ocrOnly configures a same-surface read of the three fields by OCR, for
// the values of rec.
func (a *app) ocrOnly(t testing.TB, rec screenapp.Record) *settings {
	t.Helper()
	raw, err := json.Marshal(a.sameSurfaceSection())
	if err != nil {
		t.Fatal(err)
	}
	return configuredFor(t, raw, params(rec))
}

// configuredFor configures an adapter with raw and returns its settings
// bound to params, for tests that read through readBack directly.
func configuredFor(t testing.TB, raw []byte, params map[string]string) *settings {
	t.Helper()
	s, err := configured(sdk.ConfigureRequest{Kind: Kind, Config: raw})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.bind(params)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOCRAccuracy paints 20 names, dates and amounts in three fonts and
// reads them back by OCR. It reports the share read exactly after the
// ratio rule (the record holds the run's value) and before it (Tesseract's
// text equals the value, case and spacing aside), and fails under 98 %
// after the rule.
func TestOCRAccuracy(t *testing.T) {
	if testing.Short() {
		t.Skip("60 read-backs")
	}
	a := startApp(t)
	total, exact, raw := 0, 0, 0
	for _, font := range accuracyFonts {
		for i, v := range accuracyValues {
			v.Ref, v.Font = fmt.Sprintf("acc-%d", i), font
			a.show(t, v)
			s := a.ocrOnly(t, v)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			res, err := s.readBack(ctx)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			want := params(v)
			for _, f := range []string{"name", "born", "amount"} {
				total++
				if res.unusable != "" {
					t.Logf("%s %q: unusable: %s", font, want[f], res.unusable)
					continue
				}
				if res.records[0][f] == want[f] {
					exact++
				} else {
					t.Logf("%s %s: read %q, want %q", font, f, res.records[0][f], want[f])
				}
				if normalize(res.raw[f]) == normalize(want[f]) {
					raw++
				} else {
					t.Logf("%s %s: Tesseract saw %q for %q", font, f, res.raw[f], want[f])
				}
			}
		}
	}
	after := 100 * float64(exact) / float64(total)
	before := 100 * float64(raw) / float64(total)
	t.Logf("OCR accuracy on %d fields (20 values x 3 kinds x %d fonts): %.1f %% exact after the ratio rule, %.1f %% before it", total, len(accuracyFonts), after, before)
	if after < 98 {
		t.Errorf("%.1f %% of fields read exactly after the ratio rule; want at least 98 %%", after)
	}
}

// BenchmarkReadBack measures one read-back with a warm browser and
// Tesseract's model in the page cache: reopen is tier 3 (open the record
// page in a new tab under the guards, two fields by OCR and one from the
// page structure), same_surface is tier 4 (three fields by OCR of the
// current screen). It reports p50 and p95 in milliseconds.
func BenchmarkReadBack(b *testing.B) {
	a := startApp(b)
	rec := typed("bench-1")
	a.fill(b, rec)
	for _, tc := range []struct {
		name string
		sec  map[string]any
	}{{"reopen", a.reopenSection()}, {"same_surface", a.sameSurfaceSection()}} {
		b.Run(tc.name, func(b *testing.B) {
			raw, _ := json.Marshal(tc.sec)
			s := configuredFor(b, raw, params(rec))
			if res, err := s.readBack(context.Background()); err != nil || res.unusable != "" || len(res.records) != 1 || res.records[0]["name"] != rec.Name {
				b.Fatalf("warm-up read: %+v, %v", res, err)
			}
			var took []time.Duration
			for b.Loop() {
				start := time.Now()
				res, err := s.readBack(context.Background())
				took = append(took, time.Since(start))
				if err != nil || res.unusable != "" {
					b.Fatalf("read: %+v, %v", res, err)
				}
			}
			report(b, took)
		})
	}
}

// report adds the p50 and p95 of took, in milliseconds.
func report(b *testing.B, took []time.Duration) {
	if len(took) == 0 {
		return
	}
	slices.Sort(took)
	at := func(p float64) float64 {
		i := int(p*float64(len(took))+0.5) - 1
		i = max(0, min(i, len(took)-1))
		return float64(took[i]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.95), "p95-ms")
}

// BenchmarkOCR measures Tesseract alone: one process per read over one
// region, and over three regions stacked into one image (what a read of
// three OCR fields costs).
func BenchmarkOCR(b *testing.B) {
	a := startApp(b)
	rec := typed("ocr-1")
	a.show(b, rec)
	s := a.ocrOnly(b, rec)
	// Render the three regions once, as a read does.
	var regions []*image.Gray
	for _, f := range s.fields {
		r := f.region
		shot, err := chromedp.Call(a.tab, page.CaptureScreenshot, page.CaptureScreenshotParams{
			Format: page.CaptureScreenshotFormatPng,
			Clip:   &page.Viewport{X: float64(r[0]), Y: float64(r[1]), Width: float64(r[2]), Height: float64(r[3]), Scale: ocrScale},
		})
		if err != nil {
			b.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(shot.Data))
		if err != nil {
			b.Fatal(err)
		}
		regions = append(regions, binarize(img))
	}
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("regions=%d", n), func(b *testing.B) {
			var took []time.Duration
			for b.Loop() {
				start := time.Now()
				rs, err := recognize(context.Background(), regions[:n])
				took = append(took, time.Since(start))
				if err != nil || rs[0].text == "" {
					b.Fatalf("%+v, %v", rs, err)
				}
			}
			report(b, took)
		})
	}
}
