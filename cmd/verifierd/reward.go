package main

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	"github.com/verifierd/verifierd/internal/httpapi"
	"github.com/verifierd/verifierd/internal/reward"
	"github.com/verifierd/verifierd/internal/server"
	"github.com/verifierd/verifierd/internal/session"
	"github.com/verifierd/verifierd/internal/signing"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/telemetry"
	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// startRewards loads the registered reward contracts (a refused one stops
// the daemon, naming the file and the rule) and adds RewardService to the
// gRPC server; the service keeps its marks in st and signs with signer. It
// returns the service for the HTTP routes.
func startRewards(mgr *session.Manager, st store.Backend, signer *signing.Signer, srv *grpc.Server, logger hclog.Logger) (*reward.Service, error) {
	oracle := session.NewRewardOracle(mgr)
	contracts, err := oracle.LoadContracts()
	if err != nil {
		return nil, err
	}
	svc := &reward.Service{Contracts: contracts, Oracle: oracle, Store: st, Signer: signer, EvidenceKey: signer.DerivedKey("reward-evidence")}
	server.RegisterReward(srv, svc)
	for name, c := range contracts {
		state := reward.CertAbsent
		if c.Certificate != nil {
			state = "present"
		}
		logger.Info("reward contract loaded", "name", name, "digest", c.Digest, "deployment", c.Deployment, "certificate", state)
	}
	return svc, nil
}

// serveHTTP serves the HTTP listener (--http-listen) until ctx ends,
// within the connection limits.
func serveHTTP(ctx context.Context, addr string, api http.Handler, tlsConf *tls.Config, limits *connLimits, logger hclog.Logger) (func(), error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: telemetry.HTTP(api), TLSConfig: tlsConf}
	lis = limits.httpServer(hs, lis)
	go func() {
		var err error
		if tlsConf != nil {
			err = hs.ServeTLS(lis, "", "")
		} else {
			err = hs.Serve(lis)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("http listener stopped", "error", err)
		}
	}()
	scheme := "http"
	if tlsConf != nil {
		scheme = "https"
	}
	logger.Info("verifierd http listening", "addr", scheme+"://"+lis.Addr().String())
	return func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}, nil
}

// newHTTPAPI builds the HTTP mux with the reward routes and VerifierService
// over HTTP/JSON (the in-process gateway, with /openapi.json), whose calls
// run through chain, the gRPC server's interceptor chain.
func newHTTPAPI(token string, svc *reward.Service, verifier verifierv1.VerifierServiceServer, chain grpc.UnaryServerInterceptor) (*httpapi.API, error) {
	api := httpapi.New(strings.TrimSpace(token))
	httpapi.RegisterReward(api, svc)
	if err := httpapi.RegisterGateway(api, verifier, chain); err != nil {
		return nil, err
	}
	return api, nil
}
