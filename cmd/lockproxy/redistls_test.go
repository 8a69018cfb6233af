package main

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
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/rules"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// TestRedisTLS: with locks.redis.tls, the Redis lock backend (one server,
// and Redlock) talks to a TLS-only Redis, verifying its certificate
// against the configured CA; with another CA, or without TLS, it cannot.
func TestRedisTLS(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server not found (scripts/testbed.sh install installs it)")
	}
	dir := t.TempDir()
	ca, caKey := newCA(t, dir, "ca")
	serverCert(t, dir, ca, caKey)
	other, _ := newCA(t, dir, "other")
	var addrs []string
	for i := 0; i < 3; i++ { // Redlock wants three independent servers
		addrs = append(addrs, startTLSRedis(t, bin, dir, i))
	}

	for _, mode := range []string{"", rules.RedisModeRedlock} {
		servers := `"` + addrs[0] + `"`
		if mode == rules.RedisModeRedlock {
			servers = `"` + strings.Join(addrs, `", "`) + `"`
		}
		load := func(t *testing.T, ca string) *rules.Config {
			t.Helper()
			yaml := "users: [{user: app, password: x}]\nbackends: {primary: \"127.0.0.1:1\"}\n" +
				"locks:\n  backend: redis\n  ttl: 1s\n  redis:\n    addrs: [" + servers + "]\n    mode: \"" + mode + "\"\n"
			if ca != "" {
				yaml += "    tls: {ca: \"" + ca + "\"}\n"
			}
			cfg, err := rules.LoadBytes("t.yaml", []byte(yaml))
			if err != nil {
				t.Fatal(err)
			}
			return cfg
		}
		t.Run("mode "+mode+" verified", func(t *testing.T) {
			lb := mustLocker(t, load(t, ca))
			// A Redis that just started grants nothing for one ttl (it may
			// have lost locks in a restart): give the grant that and more.
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			if err := lb.ping(ctx); err != nil {
				t.Fatalf("ping over TLS: %v", err)
			}
			set := lockmgr.NewSet(lb.locker, lockmgr.Owner{Instance: "t", Session: 1, Txn: 1, Start: time.Now()})
			if err := set.Acquire(ctx, []lockmgr.Key{{Name: "shop.sku/1", Rule: "r"}}); err != nil {
				t.Fatalf("acquire over TLS: %v", err)
			}
			if err := set.Release(ctx); err != nil {
				t.Fatalf("release over TLS: %v", err)
			}
		})
		for name, ca := range map[string]string{"another CA": other, "no TLS": ""} {
			t.Run("mode "+mode+" "+name, func(t *testing.T) {
				lb, err := newLocker(load(t, ca), prometheus.NewRegistry(), zap.NewNop())
				if err != nil {
					return // refused at start: as good as refused at ping
				}
				defer lb.close()
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				if err := lb.ping(ctx); err == nil {
					t.Fatal("the lock backend reached a TLS-only Redis it should not trust or cannot speak to")
				}
			})
		}
	}
}

func mustLocker(t *testing.T, cfg *rules.Config) *lockBackend {
	t.Helper()
	lb, err := newLocker(cfg, prometheus.NewRegistry(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lb.close)
	return lb
}

// startTLSRedis runs a Redis that speaks only TLS, on a free port, until
// the test ends.
func startTLSRedis(t *testing.T, bin, dir string, n int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	_ = ln.Close()
	cmd := exec.Command(bin, "--port", "0", "--tls-port", port, "--bind", "127.0.0.1",
		"--tls-cert-file", filepath.Join(dir, "server.pem"), "--tls-key-file", filepath.Join(dir, "server-key.pem"),
		"--tls-ca-cert-file", filepath.Join(dir, "ca.pem"), "--tls-auth-clients", "no",
		"--save", "", "--appendonly", "no", "--dir", dir)
	logPath := filepath.Join(dir, "redis"+strconv.Itoa(n)+".log")
	out, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); _ = out.Close() })
	addr := "127.0.0.1:" + port
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			_ = c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			t.Fatalf("a TLS Redis did not start:\n%s", strings.TrimSpace(string(log)))
		}
	}
}

// newCA writes NAME.pem, a self-signed CA certificate, and returns its
// path and key.
func newCA(t *testing.T, dir, name string) (string, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".pem")
	writePEM(t, path, "CERTIFICATE", der)
	return path, key
}

// serverCert writes server.pem and server-key.pem: a certificate for
// 127.0.0.1 signed by the CA at caPath.
func serverCert(t *testing.T, dir, caPath string, caKey *ecdsa.PrivateKey) {
	t.Helper()
	raw, err := os.ReadFile(caPath)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(raw)
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, "server.pem"), "CERTIFICATE", der)
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, "server-key.pem"), "EC PRIVATE KEY", kder)
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
