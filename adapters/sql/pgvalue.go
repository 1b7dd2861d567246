package sql

import (
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// PGTextValue turns one non-NULL PostgreSQL value in its text form (as
// logical decoding's pgoutput sends it) into the record value a read of
// the same column returns, so a write set's images compare with the
// adapter's reads: numbers as numbers, bytea as base64, JSON as JSON,
// timestamps as RFC 3339 in UTC (the text must be in ISO DateStyle with
// the session's TimeZone set to UTC), everything else in PostgreSQL's own
// spelling.
func PGTextValue(oid uint32, text []byte) (any, error) {
	switch oid {
	case pgtype.TimestampOID, pgtype.TimestamptzOID:
		return pgTextTimestamp(string(text))
	}
	return pgDecoderFor(oid, pgx.TextFormatCode)(text)
}

// pgTextTimestamp reads an ISO timestamp ("2026-01-02 03:04:05.5+00",
// without zone read as UTC) as RFC 3339 in UTC.
func pgTextTimestamp(s string) (any, error) {
	if s == "infinity" || s == "-infinity" {
		return s, nil
	}
	for _, layout := range []string{"2006-01-02 15:04:05.999999999Z07:00:00", "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999Z07", "2006-01-02 15:04:05.999999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC().Format(time.RFC3339Nano), nil
		}
	}
	return s, nil
}
