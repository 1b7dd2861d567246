package httpx

import (
	"context"
	"errors"
	"testing"

	"github.com/verifierd/verifierd/sdk"
)

// pagesOf is a fetch that answers pages in turn and fails with why at
// failAt (a 1-based call number; 0: never).
func pagesOf(pages [][]sdk.Record, failAt int, why string) func(context.Context) ([]sdk.Record, bool, string) {
	calls := 0
	return func(context.Context) ([]sdk.Record, bool, string) {
		calls++
		if calls == failAt {
			return nil, false, why
		}
		return pages[calls-1], calls < len(pages), ""
	}
}

func drain(c sdk.Capture) (int, error) {
	n := 0
	for _, err := range c.Records {
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

func TestPages(t *testing.T) {
	t.Parallel()
	two := [][]sdk.Record{{{"id": "1"}, {"id": "2"}}, {{"id": "3"}}}

	if c := Pages(t.Context(), 0, pagesOf(two, 1, "refused"), nil); c.Reachable || c.Reason != "refused" {
		t.Errorf("a failed first page = reachable %v, reason %q; want unreachable, refused", c.Reachable, c.Reason)
	}

	c := Pages(t.Context(), 0, pagesOf(two, 0, ""), nil)
	if n, err := drain(c); !c.Reachable || n != 3 || err != nil {
		t.Errorf("two pages = reachable %v, %d records, %v; want 3 records", c.Reachable, n, err)
	}

	c = Pages(t.Context(), 0, pagesOf(two, 2, "page 2 failed"), nil)
	if n, err := drain(c); !c.Reachable || n != 2 || err == nil || err.Error() != "page 2 failed" {
		t.Errorf("a failed second page = %d records, %v; want 2 records, then the failure", n, err)
	}

	changed := errors.New("the result changed")
	c = Pages(t.Context(), 0, pagesOf(two, 0, ""), func() error { return changed })
	if n, err := drain(c); n != 3 || !errors.Is(err, changed) {
		t.Errorf("a read done refuses = %d records, %v; want 3 records, then its error", n, err)
	}
}
