package judge

import (
	"strings"
	"testing"
)

// TestIncompleteReadCode: an after read that answered but is not whole
// (Snapshot.Code) is INDETERMINATE with that code, class indeterminate, in
// both the map and the compact judge; without a code an unreachable read
// stays SOR_UNREACHABLE, class unavailable. The records are never judged.
func TestIncompleteReadCode(t *testing.T) {
	effects, err := ParseEffects([]byte(`[{kind: record_written, match: {p: "1"}, count_new_only: true}]`), "effects")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Bind(effects[0], nil, "effects[0]")
	if err != nil {
		t.Fatal(err)
	}
	before := Snapshot{Reachable: true}
	for _, tt := range []struct {
		code, wantCode string
		wantClass      Class
	}{
		{ReasonReadMayBeTruncated, ReasonReadMayBeTruncated, ClassIndeterminate},
		{ReasonReadIncomplete, ReasonReadIncomplete, ClassIndeterminate},
		{"", ReasonSORUnreachable, ClassUnavailable},
		{ReasonAccessRejected, ReasonAccessRejected, ClassUnavailable},
	} {
		after := Snapshot{Reason: "100 records, max_records 100", Code: tt.code, Records: []Record{{"p": "1"}}}
		for name, v := range map[string]Verdict{
			"map":   Judge(c, before, after, Options{}),
			"batch": JudgeBatch(c, batchOf(before), batchOf(after), Options{}),
		} {
			if v.Decision != Indeterminate || v.Class != tt.wantClass || len(v.Reasons) != 1 || v.Reasons[0].Code != tt.wantCode ||
				!strings.Contains(v.Reasons[0].Message, "max_records 100") || len(v.Matched) != 0 {
				t.Errorf("%s, code %q: %s/%s %+v; want INDETERMINATE/%s/%s with the adapter's reason", name, tt.code, v.Decision, v.Class, v.Reasons, tt.wantClass, tt.wantCode)
			}
		}
	}
}
