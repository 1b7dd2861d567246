package sql

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseTableName(t *testing.T) {
	t.Parallel()
	good := map[string]TableName{
		"encounters":                 {Table: "encounters"},
		"public.encounters":          {Schema: "public", Table: "encounters"},
		"tabLoan Application":        {Table: "tabLoan Application"},
		"site_db.tabLoan-Repayment$": {Schema: "site_db", Table: "tabLoan-Repayment$"},
	}
	for in, want := range good {
		got, err := ParseTableName(in)
		if err != nil || got != want {
			t.Errorf("ParseTableName(%q) = %+v, %v", in, got, err)
		}
		if q := got.quoted(`"`); strings.Count(q, `"`) != 2*strings.Count(in+".", ".") {
			t.Errorf("%q quotes as %s", in, q)
		}
	}
	for _, bad := range []string{"", "a.b.c", `t"; DROP TABLE x; --`, "t`", "t'", "t;", " t", "t ", "a..b", "t\x00", "t\n", strings.Repeat("x", 65), "t/*"} {
		if got, err := ParseTableName(bad); err == nil {
			t.Errorf("ParseTableName(%q) = %+v; want a refusal", bad, got)
		}
	}
}

func TestParseExpect(t *testing.T) {
	t.Parallel()
	tables, err := ParseTables("a, b,public.c")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseExpect("a=+1, public.c=-2,b=0", tables)
	if err != nil || !cmp.Equal(got, map[string]int64{"a": 1, "b": 0, "public.c": -2}) {
		t.Errorf("ParseExpect = %v, %v", got, err)
	}
	for _, bad := range []string{"a", "a=one", "d=+1", "a=1,a=2", "a=1.5"} {
		if _, err := ParseExpect(bad, tables); err == nil {
			t.Errorf("ParseExpect(%q) accepted", bad)
		}
	}
	if _, err := ParseTables("a,a"); err == nil {
		t.Error("a table listed twice was accepted")
	}
}

func TestAuditDeltas(t *testing.T) {
	t.Parallel()
	tables, _ := ParseTables("loans,payments,audit_log")
	before := map[string]int64{"loans": 10, "payments": 3, "audit_log": 100}
	expect := map[string]int64{"loans": 1, "audit_log": 1}
	n := func(v int64) *int64 { return &v }
	tests := []struct {
		name        string
		after       map[string]int64
		wantVerdict string
		wantCodes   []string
	}{
		{"exact", map[string]int64{"loans": 11, "payments": 3, "audit_log": 101}, AuditConfirmed, []string{ReasonTableDeltaExact}},
		{"double write", map[string]int64{"loans": 12, "payments": 3, "audit_log": 101}, AuditRefuted, []string{ReasonTableDeltaMismatch}},
		{"stray write elsewhere", map[string]int64{"loans": 11, "payments": 4, "audit_log": 101}, AuditRefuted, []string{ReasonTableDeltaMismatch}},
		{"a delete hidden by an insert is still refuted", map[string]int64{"loans": 11, "payments": 2, "audit_log": 102}, AuditRefuted, []string{ReasonTableDeltaMismatch, ReasonTableDeltaMismatch}},
		{"nothing landed", map[string]int64{"loans": 10, "payments": 3, "audit_log": 100}, AuditRefuted, []string{ReasonTableDeltaMismatch, ReasonTableDeltaMismatch}},
		{"unreadable after", nil, AuditIndeterminate, []string{ReasonTablesUnreadable}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := AuditDeltas(tables, before, tt.after, expect, "connection refused")
			var codes []string
			for _, r := range got.Reasons {
				codes = append(codes, r.Code)
			}
			if got.Verdict != tt.wantVerdict || !cmp.Equal(codes, tt.wantCodes) {
				t.Errorf("AuditDeltas = %s %v (%+v); want %s %v", got.Verdict, codes, got.Reasons, tt.wantVerdict, tt.wantCodes)
			}
			if len(got.Tables) != 3 || got.Tables[0].Table != "loans" || got.Tables[0].Expected != 1 || got.Tables[1].Expected != 0 {
				t.Errorf("tables %+v", got.Tables)
			}
			if tt.after == nil && (got.Tables[0].After != nil || got.Tables[0].Delta != nil) {
				t.Errorf("an unread after count is reported: %+v", got.Tables[0])
			}
			if tt.after != nil && !cmp.Equal(got.Tables[0].Delta, n(tt.after["loans"]-10)) {
				t.Errorf("loans delta %v", got.Tables[0].Delta)
			}
		})
	}
}
