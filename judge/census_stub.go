package judge

// A minimal stand-in of the census API (JUDGE.md §3a) so that the daemon
// compiles against it; the real implementation replaces this file.

// Census is a candidate's census read: the whole collection's records,
// before and after the action.
type Census struct{ Before, After Snapshot }

// Census reason codes.
const (
	ReasonCensusUnusable        = "CENSUS_UNUSABLE"
	ReasonExistingRecordChanged = "EXISTING_RECORD_CHANGED"
)

// CensusUsable reports whether s can serve as c's census: it was read, and
// every record carries c's identity field.
func CensusUsable(c *Contract, s Snapshot) (ok bool, reason string) {
	if !s.Reachable {
		reason = s.Reason
		if reason == "" {
			reason = "unreachable"
		}
		return false, "the census could not be read: " + reason
	}
	for i, r := range s.Records {
		if _, ok := r[c.IdentityField]; !ok {
			return false, "census record " + itoa(i) + " has no identity field " + c.IdentityField
		}
	}
	return true, ""
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}
