package server

import (
	"errors"
	"net/http"
	"testing"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/verifierd/verifierd/internal/session"
)

// TestErrorKindStatus: each session refusal kind's gRPC code, from the one
// mapping the API layer uses, and the HTTP status the gateway answers it
// with; an error that is no session refusal is Internal.
func TestErrorKindStatus(t *testing.T) {
	for k, want := range map[session.ErrorKind]struct {
		code codes.Code
		http int
	}{
		session.Invalid:  {codes.InvalidArgument, http.StatusBadRequest},
		session.Refused:  {codes.FailedPrecondition, http.StatusBadRequest},
		session.NotFound: {codes.NotFound, http.StatusNotFound},
		session.Denied:   {codes.PermissionDenied, http.StatusForbidden},
		session.Exists:   {codes.AlreadyExists, http.StatusConflict},
		0:                {codes.InvalidArgument, http.StatusBadRequest},
	} {
		err := toStatus(&session.Error{Kind: k, Path: "p", Message: "m"})
		if got := status.Code(err); got != want.code {
			t.Errorf("kind %d: %s, want %s", k, got, want.code)
		}
		if got := runtime.HTTPStatusFromCode(status.Code(err)); got != want.http {
			t.Errorf("kind %d: HTTP %d, want %d", k, got, want.http)
		}
	}
	if got := status.Code(toStatus(errors.New("boom"))); got != codes.Internal {
		t.Errorf("a plain error: %s, want Internal", got)
	}
}
