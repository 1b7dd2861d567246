package sdk_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/sdk"
)

func TestSingleValue(t *testing.T) {
	if v, ok, err := sdk.SingleValue[string]("uid=ann", "mail", nil); ok || err != nil || v != "" {
		t.Errorf("no value = %q, %v, %v; want the field absent and no error", v, ok, err)
	}
	if v, ok, err := sdk.SingleValue("uid=ann", "mail", []string{"ann@example.org"}); !ok || err != nil || v != "ann@example.org" {
		t.Errorf("one value = %q, %v, %v; want it", v, ok, err)
	}
	for _, values := range [][]string{{"a@example.org", "b@example.org"}, {"same", "same"}} {
		_, ok, err := sdk.SingleValue("uid=ann", "mail", values)
		se, is := errors.AsType[*sdk.ShapeError](err)
		if ok || !is || se.Record != "uid=ann" || se.Field != "mail" {
			t.Fatalf("values %q = ok %v, err %v; want a *ShapeError naming uid=ann and mail", values, ok, err)
		}
		if msg := err.Error(); !strings.Contains(msg, "record uid=ann, field mail: holds 2 values") {
			t.Errorf("error %q does not name the record, the field and the count", msg)
		}
	}
}

func TestUnshapeableIsUnreachable(t *testing.T) {
	_, _, err := sdk.SingleValue("7", "ward", []int{1, 2})
	c := sdk.Unshapeable(err)
	if c.Reachable || c.Records != nil || c.Code != "" || c.At.IsZero() {
		t.Fatalf("Unshapeable = %+v; want an unreachable capture with no records, no code and the time of the read", c)
	}
	if !strings.Contains(c.Reason, "record 7, field ward") || !strings.Contains(c.Reason, "not judged") {
		t.Errorf("reason %q does not name the record and the field, or does not say the read is not judged", c.Reason)
	}
}

func TestCaptureRequestReads(t *testing.T) {
	old := sdk.CaptureRequest{}
	if !old.Reads("anything") {
		t.Error("a request without ReadFields (an older daemon) must read every field")
	}
	req := sdk.CaptureRequest{Selector: map[string]string{"uid": "ann"}, ReadFields: []string{"mail"}}
	for field, want := range map[string]bool{"uid": true, "mail": true, "cn": false} {
		if got := req.Reads(field); got != want {
			t.Errorf("Reads(%q) = %v; want %v", field, got, want)
		}
	}
}
