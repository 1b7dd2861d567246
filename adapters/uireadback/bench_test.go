package uireadback

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/testservers/recordapp"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/adaptertest"
)

// BenchmarkReadBack measures one read-back (fresh context, sign-in, record
// page, identity, rows) of a patient with five encounters, and reports its
// latency percentiles as p50-ms and p95-ms:
//
//   - cold: a new Chromium process for every read-back, as the first read
//     of a plugin process;
//   - warm: the pooled browser, whose fresh context for the read-back was
//     opened when the previous read-back ended (the usual case: a Begin's
//     read, then the automation acts, then the Verify's read);
//   - warm_back_to_back: the pooled browser read again at once, so the read
//     also waits for its fresh context to open (settlement polling).
//
// Run with a fixed count, e.g. go test -run '^$' -bench ReadBack -benchtime 30x.
func BenchmarkReadBack(b *testing.B) {
	a := startApp(b)
	for i := range 5 {
		a.Add(recordapp.Encounter{PatientID: "b1", Type: "Triage", Note: "Follow-up " + string(rune('A'+i)), Date: "2026-05-06"})
	}
	req := request(b, a.section(), "b1", recordapp.ReaderPassword)

	read := func(b *testing.B, ad sdk.Adapter) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := ad.CaptureAfter(ctx, sdk.CaptureRequest{CaptureID: "bench", Timeout: 30 * time.Second, Params: req.Params})
		if err != nil {
			b.Fatal(err)
		}
		if !c.Reachable {
			b.Fatal(c.Reason)
		}
	}
	configured := func(b *testing.B, br *Browser) sdk.Adapter {
		ad := NewWithBrowser(br)()
		if err := ad.Configure(context.Background(), req.ConfigureRequest); err != nil {
			b.Fatal(err)
		}
		return ad
	}

	b.Run("cold", func(b *testing.B) {
		var took []time.Duration
		for b.Loop() {
			br := NewBrowser(BrowserOptions{IdleTimeout: -1, NoSpare: true})
			ad := configured(b, br)
			start := time.Now()
			read(b, ad)
			took = append(took, time.Since(start))
			b.StopTimer()
			br.Close()
			b.StartTimer()
		}
		report(b, took)
	})
	b.Run("warm", func(b *testing.B) {
		br := NewBrowser(BrowserOptions{IdleTimeout: -1})
		defer br.Close()
		ad := configured(b, br)
		read(b, ad) // start the browser
		var took []time.Duration
		for b.Loop() {
			b.StopTimer()
			if err := br.waitSpare(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			start := time.Now()
			read(b, ad)
			took = append(took, time.Since(start))
		}
		report(b, took)
	})
	b.Run("warm_back_to_back", func(b *testing.B) {
		br := NewBrowser(BrowserOptions{IdleTimeout: -1})
		defer br.Close()
		ad := configured(b, br)
		read(b, ad)
		var took []time.Duration
		for b.Loop() {
			start := time.Now()
			read(b, ad)
			took = append(took, time.Since(start))
		}
		report(b, took)
	})
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

// BenchmarkPatientsOneProcess: 20 patients read back through one plugin
// process (the real binary, as the daemon runs it) and one configured
// instance: each read carries its own patient's run parameters, the
// process keeps one browser, and every read opens a fresh context of it.
// The first read (the browser's start) is outside the timing; the p50 and
// p95 are of the 20 reads. paced leaves a second (untimed) between
// patients, an automation's pace, so the browser has the next read's
// context open (the warm read); back_to_back reads at once, so each read
// also waits for its context. chromium-procs counts the browser processes
// under the plugin at the end: one browser's worth, whatever the patients.
// Run with -benchtime 1x.
func BenchmarkPatientsOneProcess(b *testing.B) {
	b.Run("paced", func(b *testing.B) { benchPatients(b, time.Second) })
	b.Run("back_to_back", func(b *testing.B) { benchPatients(b, 0) })
}

func benchPatients(b *testing.B, pace time.Duration) {
	const patients = 20
	a := startApp(b)
	for i := range patients {
		p := "pp-" + strconv.Itoa(i)
		a.AddPatient(p)
		a.Add(recordapp.Encounter{PatientID: p, Type: "Triage", Note: "Follow-up " + p, Date: "2026-05-06"})
	}
	in := adaptertest.Subprocess(b, pluginBinary)
	req := request(b, a.section(), "pp-0", recordapp.ReaderPassword)
	if err := in.Setup(b.Context(), req.ConfigureRequest, req.Params); err != nil {
		b.Fatal(err)
	}
	read := func(patient string) time.Duration {
		creq := sdk.CaptureRequest{CaptureID: "bench", Timeout: 30 * time.Second, Params: map[string]string{"patient_id": patient}}
		start := time.Now()
		_, recs := adaptertest.ReadAll(b, in, true, creq)
		took := time.Since(start)
		if len(recs) != 1 || recs[0]["patient_id"] != patient {
			b.Fatalf("patient %s read %v", patient, recs)
		}
		return took
	}
	read("pp-0") // start the browser
	var took []time.Duration
	for b.Loop() {
		for i := range patients {
			if pace > 0 {
				b.StopTimer()
				time.Sleep(pace)
				b.StartTimer()
			}
			took = append(took, read("pp-"+strconv.Itoa(i)))
		}
	}
	report(b, took)
	b.ReportMetric(float64(countDescendants(in.Pid(), "chrom")), "chromium-procs")
}

// countDescendants counts the processes under pid whose command name
// contains name.
func countDescendants(pid int, name string) int {
	children := map[int][]int{}
	comm := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(stat)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(s[end+2:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], p)
		comm[p] = s[open+1 : end]
	}
	n := 0
	var walk func(int)
	walk = func(p int) {
		for _, c := range children[p] {
			if strings.Contains(strings.ToLower(comm[c]), name) {
				n++
			}
			walk(c)
		}
	}
	walk(pid)
	return n
}
