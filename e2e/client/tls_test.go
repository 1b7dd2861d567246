package client_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/verifierd/verifierd/client"
	"github.com/verifierd/verifierd/internal/server"
)

// newCA returns a fresh CA's certificate (PEM) and a server certificate
// for 127.0.0.1 that it signed.
func newCA(t *testing.T) ([]byte, tls.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "client test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "verifierd"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestTLS: WithTLSCA trusts the daemon's CA and the token travels over
// TLS; a plaintext client, and a CA file with no certificate, do not get
// through.
func TestTLS(t *testing.T) {
	caPEM, cert := newCA(t)
	c := startClinicWith(t, server.Options{BearerToken: "tls-token",
		TLS: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}})
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CLIENT_TLS_TOKEN", "tls-token")
	cl := dial(t, c, client.WithTLSCA(caFile), client.WithTokenEnv("CLIENT_TLS_TOKEN"))
	if err := cl.Step(t.Context(), triage("t1", "n"), c.save("t1", "n")); err != nil {
		t.Fatalf("Step over TLS = %v, want nil", err)
	}
	if _, err := dial(t, c, client.WithTokenEnv("CLIENT_TLS_TOKEN")).Begin(t.Context(), triage("t2", "n")); err == nil {
		t.Fatal("a plaintext client got through to a TLS daemon")
	}
	empty := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(empty, []byte("no certificate here\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Dial(c.addr, client.WithTLSCA(empty)); err == nil {
		t.Fatal("Dial with a CA file holding no certificate: want an error naming it")
	}
	// With TLS, the token may go to an address that is not loopback.
	if _, err := client.Dial("192.0.2.1:7443", client.WithTLSCA(caFile), client.WithTokenEnv("CLIENT_TLS_TOKEN")); err != nil {
		t.Fatalf("Dial with TLS off loopback = %v, want it allowed", err)
	}
}
