package httprecords

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"testing"
)

// EchoAuthField is the field EchoAuthorization adds to every listed record.
const EchoAuthField = "request_authorization"

// EchoAuthorization serves f behind a second server whose list answers
// carry, in every record of "data", the Authorization header the request
// presented (field EchoAuthField): an API that returns each row with the
// audit trail of the request that read it, as some do. A daemon that reads
// it must mask its own credential wherever the records go. It returns the
// server's URL and, over TLS, its CA file.
func EchoAuthorization(t testing.TB, f *Frappe, useTLS bool) (url, caFile string) {
	t.Helper()
	return EchoTransformed(t, f, useTLS, func(h string) string { return h })
}

// EchoTransformed is EchoAuthorization for a server that echoes the header
// changed on the way: echo turns the Authorization header presented into
// the value each record carries (a lower-cased copy, the credential base64-
// or URL-encoded into a callback address), as servers that log a request
// their own way do.
func EchoTransformed(t testing.TB, f *Frappe, useTLS bool, echo func(authorization string) string) (url, caFile string) {
	t.Helper()
	srv, ca := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		f.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if rec.Code == http.StatusOK {
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.UseNumber()
			var out map[string]any
			if dec.Decode(&out) == nil {
				if data, ok := out["data"].([]any); ok {
					for _, d := range data {
						if m, ok := d.(map[string]any); ok {
							m[EchoAuthField] = echo(r.Header.Get("Authorization"))
						}
					}
					body, _ = json.Marshal(out)
				}
			}
		}
		maps.Copy(w.Header(), rec.Header())
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		w.Write(body)
	}), useTLS)
	return srv.URL, ca
}
