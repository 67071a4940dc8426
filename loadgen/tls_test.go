package loadgen

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
)

// selfSigned writes a certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kura test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func TestTLS(t *testing.T) {
	dir := t.TempDir()
	cert, key := selfSigned(t, dir)
	port, err := servers.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	srv := servertest.Redis(t, servers.RedisConfig{Password: "pw", Args: []string{
		"--tls-port", strconv.Itoa(port), "--tls-cert-file", cert, "--tls-key-file", key,
		"--tls-ca-cert-file", cert, "--tls-auth-clients", "no",
	}})
	target := "rediss://:pw@127.0.0.1:" + strconv.Itoa(port)
	res := mustRun(t, Config{Target: target, TLSCAFile: cert, Command: CmdSet, Connections: 2, Requests: 300})
	if res.Errors != 0 || res.Server.Commands["set"] != 300 {
		t.Errorf("TLS run: errors %d %v, server %v", res.Errors, res.ErrorSamples, res.Server.Commands)
	}
	_, err = Run(context.Background(), Config{Target: target, Requests: 1})
	if err == nil || !strings.Contains(err.Error(), "--tls-ca") {
		t.Errorf("unknown CA: err = %v, want a hint at --tls-ca/--insecure", err)
	}
	res = mustRun(t, Config{Target: target, InsecureTLS: true, Requests: 10, Connections: 1})
	if res.Errors != 0 {
		t.Errorf("--insecure: %v", res.ErrorSamples)
	}
	_, err = Run(context.Background(), Config{Target: "rediss://:pw@" + srv.Addr, Requests: 1, Timeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "TLS") {
		t.Errorf("rediss:// to a plain port: err = %v", err)
	}
}
