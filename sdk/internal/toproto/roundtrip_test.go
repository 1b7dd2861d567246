package toproto_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	"github.com/verifierd/verifierd/sdk"
	adapterv1 "github.com/verifierd/verifierd/sdk/internal/adapterpb"
	"github.com/verifierd/verifierd/sdk/internal/fromproto"
	"github.com/verifierd/verifierd/sdk/internal/toproto"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// wire marshals and unmarshals m, so that a round trip also crosses the real
// encoding and not only the Go structs.
func wire[M proto.Message](t *testing.T, m M) M {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out := m.ProtoReflect().New().Interface().(M)
	if err := proto.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestInfoRoundTrip(t *testing.T) {
	t.Parallel()
	in := sdk.Info{Kind: "csv-ledger", Tier: sdk.TierReacquiredState, NeedsBaseline: true, AbsenceNotProof: true, Description: "ledger files"}
	got, versions := fromproto.Info(wire(t, toproto.GetInfoResponse(in, []string{"v1", "v2"})))
	if diff := cmp.Diff(in, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"v1", "v2"}, versions); diff != "" {
		t.Errorf("versions (-want +got):\n%s", diff)
	}
}

func TestConfigureRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   sdk.ConfigureRequest
	}{
		{"full", sdk.ConfigureRequest{
			Kind: "sql", Config: json.RawMessage(`{"sql_query":"SELECT 1"}`),
			Secrets:       map[string]string{"password": "s3cret"},
			EffectTimeout: 1500 * time.Millisecond, APIVersion: "v1",
		}},
		{"empty maps come back empty, not nil", sdk.ConfigureRequest{Kind: "x", Secrets: map[string]string{}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := fromproto.ConfigureRequest(wire(t, toproto.ConfigureRequest(tc.in)))
			if diff := cmp.Diff(tc.in, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfigureResponseRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   error
		want error
	}{
		{"accepted", nil, nil},
		{"refusal keeps its path", &refusal.Error{Path: "options.table", Message: "required"}, &refusal.Error{Path: "options.table", Message: "required"}},
		{"wrapped refusal", errors.Join(errors.New("context"), &refusal.Error{Path: "a", Message: "b"}), &refusal.Error{Path: "a", Message: "b"}},
		{"any other error refuses without a path", errors.New("no"), &refusal.Error{Message: "no"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			id, got := fromproto.ConfigureResponse(wire(t, toproto.ConfigureResponse("i1", tc.in)))
			if (got == nil) != (id == "i1") {
				t.Errorf("instance id %q with error %v", id, got)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	// A response that is neither ok nor carries a refusal is still a refusal.
	if _, err := fromproto.ConfigureResponse(&adapterv1.ConfigureResponse{}); err == nil {
		t.Error("an empty ConfigureResponse was taken as accepted")
	}
}

func TestTestResultRoundTrip(t *testing.T) {
	t.Parallel()
	in := sdk.TestResult{Reachable: true, Message: "ok", Warnings: []string{"role can write"}, Latency: 3 * time.Millisecond}
	if diff := cmp.Diff(in, fromproto.TestResult(wire(t, toproto.TestConnectionResponse(in)))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestCaptureRequestRoundTrip(t *testing.T) {
	t.Parallel()
	in := sdk.CaptureRequest{
		CaptureID: "cap-1", EffectIndex: 2, Selector: map[string]string{"patient_id": "p1", "type": "Triage"},
		IdentityField: "id", Timeout: 5 * time.Second, ContractHash: "sha256:ee92", EffectKind: "record_written",
		Params:     map[string]string{"patient_id": "p1"},
		ReadFields: []string{"patient_id", "type", "status"},
		ExpectedValues: map[string][]string{
			"patient_id": {"p1"}, "type": {"Triage"}, "status": {"Closed", "closed  later"},
		},
	}
	if diff := cmp.Diff(in, fromproto.CaptureRequest(wire(t, toproto.CaptureSpec(in)), in.Params)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// A daemon that sends neither (an older one) leaves both nil, which an
	// adapter reads as "every field is read" and "no spelling known".
	old := sdk.CaptureRequest{CaptureID: "cap-2", Selector: map[string]string{}, Params: map[string]string{}}
	got := fromproto.CaptureRequest(wire(t, toproto.CaptureSpec(old)), old.Params)
	if got.ReadFields != nil || got.ExpectedValues != nil {
		t.Errorf("a request without read fields came back with ReadFields %v, ExpectedValues %v; want both nil", got.ReadFields, got.ExpectedValues)
	}
}

func TestHeaderRoundTrip(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 4, 5, 6, 7, 8, time.UTC)
	now := func() time.Time { return at }
	tests := []struct {
		name string
		in   sdk.Capture
		want fromproto.Header
	}{
		{"reachable", sdk.Capture{Reachable: true, At: at}, fromproto.Header{Reachable: true, At: at}},
		{"zero time is now", sdk.Capture{Reachable: true}, fromproto.Header{Reachable: true, At: at}},
		{"unreachable", sdk.Capture{Reason: "refused", At: at}, fromproto.Header{Reason: "refused", At: at}},
		{"unreachable always says why", sdk.Capture{At: at}, fromproto.Header{Reason: "the adapter gave no reason", At: at}},
		{"a reason on a reachable read is dropped", sdk.Capture{Reachable: true, Reason: "x", At: at}, fromproto.Header{Reachable: true, At: at}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			chunk := wire(t, toproto.HeaderChunk(tc.in, now))
			if diff := cmp.Diff(tc.want, fromproto.CaptureHeader(chunk.GetHeader())); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestRecordRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   sdk.Record
		want sdk.Record
	}{
		{"exact numbers keep their text", sdk.Record{"big": json.Number("12345678901234567890"), "dec": json.Number("0.10")},
			sdk.Record{"big": json.Number("12345678901234567890"), "dec": json.Number("0.10")}},
		{"int64 and float64 become json.Number", sdk.Record{"i": int64(math.MaxInt64), "f": 42.5, "one": 1.0},
			sdk.Record{"i": json.Number("9223372036854775807"), "f": json.Number("42.5"), "one": json.Number("1")}},
		{"strings, booleans and null", sdk.Record{"s": "Zoë \"q\" <b>", "t": true, "n": nil, "empty": ""},
			sdk.Record{"s": "Zoë \"q\" <b>", "t": true, "n": nil, "empty": ""}},
		{"nested values survive as JSON", sdk.Record{"o": map[string]any{"a": 1}},
			sdk.Record{"o": map[string]any{"a": json.Number("1")}}},
		{"empty record", sdk.Record{}, sdk.Record{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, err := toproto.Record(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := fromproto.Record(b)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestRecordRefusals(t *testing.T) {
	t.Parallel()
	for _, in := range []sdk.Record{nil, {"nan": math.NaN()}, {"inf": math.Inf(1)}, {"bad": json.Number("1e")}} {
		if b, err := toproto.Record(in); err == nil {
			t.Errorf("toproto.Record(%v) = %s; want an error", in, b)
		}
	}
	for _, in := range []string{``, `null`, `[1]`, `"s"`, `{"a":1} {"b":2}`, `{"a":`} {
		if r, err := fromproto.Record([]byte(in)); err == nil {
			t.Errorf("fromproto.Record(%q) = %v; want an error", in, r)
		}
	}
}

func TestBatcherBoundsCountAndBytes(t *testing.T) {
	t.Parallel()
	b := toproto.Batcher{MaxRecords: 3, MaxBytes: 100}
	var batches []*adapterv1.RecordBatch
	var sent []string
	add := func(n int) {
		rec := sdk.Record{"v": strings.Repeat("y", n)}
		full, size, err := b.Add(rec)
		if err != nil {
			t.Fatal(err)
		}
		enc, _ := toproto.Record(rec)
		if size != len(enc) {
			t.Errorf("Add reported %d bytes for a record of %d", size, len(enc))
		}
		sent = append(sent, string(enc))
		if full != nil {
			batches = append(batches, full)
		}
	}
	for range 7 {
		add(0) // {"v":""}: 8 bytes + 5 for its end: count bound first
	}
	add(80)  // would overflow the bytes of the open batch
	add(200) // alone over MaxBytes: a batch of one
	add(0)
	if rest := b.Flush(); rest != nil {
		batches = append(batches, rest)
	}
	var sizes []int
	var got []string
	for _, batch := range batches {
		// What the receiver takes from the wire.
		recs, err := fromproto.Batch(wire(t, batch))
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(recs))
		for _, r := range recs {
			got = append(got, string(r))
		}
	}
	if diff := cmp.Diff([]int{3, 3, 1, 1, 1, 1}, sizes); diff != "" {
		t.Errorf("batch sizes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(sent, got); diff != "" {
		t.Errorf("records through the batches (-sent +received):\n%s", diff)
	}
	if b.Flush() != nil {
		t.Error("Flush after Flush returned records")
	}
}

// TestEncoderReusesFieldOrder: an Encoder fed records of changing field
// sets encodes each exactly as Record does.
func TestEncoderReusesFieldOrder(t *testing.T) {
	t.Parallel()
	var e toproto.Encoder
	for _, r := range []sdk.Record{
		{"b": "1", "a": int64(2)}, {"a": "x", "b": nil}, // same fields
		{"a": "x", "c": true}, // as many fields, another one among them
		{"c": true, "a": "x"}, {}, {"z": json.Number("1.50")}, {"a": 1, "b": 2, "c": 3},
	} {
		want, err := toproto.Record(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.Append([]byte("prefix"), r)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != "prefix"+string(want) {
			t.Errorf("Encoder.Append(%v) = %s; want prefix%s", r, got, want)
		}
	}
	if _, err := e.Append(nil, sdk.Record{"a": math.NaN(), "b": 1, "c": 2}); err == nil {
		t.Error("NaN encoded")
	}
}

// TestBatchRefusesBadEnds: the receiver refuses a packed batch whose ends
// do not cut its buffer into records, and one that fills both forms.
func TestBatchRefusesBadEnds(t *testing.T) {
	t.Parallel()
	recs := []byte(`{"a":1}{"b":2}`)
	for _, tc := range []struct {
		name  string
		batch *adapterv1.RecordBatch
		want  string
	}{
		{"not increasing", &adapterv1.RecordBatch{Records: recs, Ends: []uint32{7, 7, 14}}, "not after the previous end"},
		{"decreasing", &adapterv1.RecordBatch{Records: recs, Ends: []uint32{100, 14}}, "within the batch's 14 bytes"},
		{"empty first record", &adapterv1.RecordBatch{Records: recs, Ends: []uint32{0, 14}}, "not after the previous end"},
		{"short of the buffer", &adapterv1.RecordBatch{Records: recs, Ends: []uint32{7}}, "last record ends at byte 7 of its 14"},
		{"past the buffer", &adapterv1.RecordBatch{Records: recs, Ends: []uint32{7, 15}}, "last record ends at byte 15 of its 14"},
		{"records without ends", &adapterv1.RecordBatch{Records: recs}, "no record ends"},
		{"ends without records", &adapterv1.RecordBatch{Ends: []uint32{1}}, "last record ends at byte 1 of its 0"},
		{"both forms", &adapterv1.RecordBatch{RecordsJson: [][]byte{[]byte(`{}`)}, Records: recs, Ends: []uint32{7, 14}}, "both"},
	} {
		if got, err := fromproto.Batch(wire(t, tc.batch)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Batch = %q, %v; want an error containing %q", tc.name, got, err, tc.want)
		}
	}
	got, err := fromproto.Batch(wire(t, &adapterv1.RecordBatch{Records: recs, Ends: []uint32{7, 14}}))
	if err != nil || len(got) != 2 || string(got[0]) != `{"a":1}` || string(got[1]) != `{"b":2}` || cap(got[0]) != 7 {
		t.Errorf("Batch = %q (cap %d), %v; want the two records, the first capped", got, cap(got[0]), err)
	}
	// The unpacked form of earlier SDKs is still read.
	got, err = fromproto.Batch(wire(t, &adapterv1.RecordBatch{RecordsJson: [][]byte{[]byte(`{"a":1}`)}}))
	if err != nil || len(got) != 1 || string(got[0]) != `{"a":1}` {
		t.Errorf("Batch(records_json) = %q, %v", got, err)
	}
}

func TestVerdictRoundTrip(t *testing.T) {
	t.Parallel()
	obs, exp := int64(2), int64(1)
	in := sdk.VerdictRequest{
		CaptureID: "c", EffectIndex: 1, ContractHash: "sha256:x", Verdict: sdk.VerdictRefuted,
		Reasons:       []sdk.Reason{{Code: "COUNT_OVER", Message: "2 > 1"}},
		ObservedCount: &obs, ExpectedCount: &exp, Tier: sdk.TierIndependentSystem,
		Params: map[string]string{"patient_id": "p1"},
	}
	if diff := cmp.Diff(in, fromproto.VerdictRequest(wire(t, toproto.VerdictRequest(in)))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	in.ObservedCount, in.ExpectedCount, in.Verdict = nil, nil, sdk.VerdictIndeterminate
	if diff := cmp.Diff(in, fromproto.VerdictRequest(wire(t, toproto.VerdictRequest(in)))); diff != "" {
		t.Errorf("nil counts (-want +got):\n%s", diff)
	}

	for _, d := range []sdk.Demotion{{}, {Verdict: sdk.VerdictIndeterminate, ReasonCode: "CACHED_PAGE", Message: "m"}} {
		if diff := cmp.Diff(d, fromproto.Demotion(wire(t, toproto.VerdictResponse(d)))); diff != "" {
			t.Errorf("demotion (-want +got):\n%s", diff)
		}
	}
	// A demotion with a verdict the daemon cannot read is taken cautiously.
	got := fromproto.Demotion(&adapterv1.VerdictResponse{Demotion: &adapterv1.Demotion{Verdict: 99, ReasonCode: "X"}})
	if got.Verdict != sdk.VerdictIndeterminate {
		t.Errorf("unknown demotion verdict = %q; want INDETERMINATE", got.Verdict)
	}
}
