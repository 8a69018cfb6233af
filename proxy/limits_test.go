package proxy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"database/sql"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/rules"
)

// selfSigned writes a throwaway certificate and key for 127.0.0.1.
func selfSigned(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "lockproxy test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
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
	cert, key := selfSigned(t)
	for _, require := range []bool{false, true} {
		p := startProxy(t, func(c *rules.Config) {
			c.Proxy.TLS = &rules.TLSConfig{Cert: cert, Key: key}
			c.Proxy.RequireTLS = require
		})
		// tls=skip-verify fails unless the proxy offers TLS and the
		// handshake switches to it.
		db := openDB(t, p.bed.DSN(p.addr, "", "tls=skip-verify"))
		var one int
		if err := db.QueryRow("SELECT 1").Scan(&one); err != nil || one != 1 {
			t.Fatalf("query over TLS: %v", err)
		}
		plain, _ := sql.Open("mysql", p.bed.DSN(p.addr, "", "tls=false"))
		err := plain.Ping()
		plain.Close()
		switch {
		case require && (err == nil || !strings.Contains(err.Error(), "must use TLS")):
			t.Errorf("require_tls: a plain client was let in (%v)", err)
		case !require && err != nil:
			t.Errorf("TLS optional: a plain client was refused: %v", err)
		}
	}
}

func TestIdleTimeout(t *testing.T) {
	p := startProxy(t, func(c *rules.Config) { c.Proxy.IdleTimeout = rules.Duration(300 * time.Millisecond) })
	db := p.db(t, "", "")
	db.SetMaxOpenConns(1)
	if _, err := db.Exec("SELECT 1"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the idle session is closed", func() bool {
		p.srv.mu.Lock()
		defer p.srv.mu.Unlock()
		return len(p.srv.sessions) == 0
	})
}

func TestLoginThrottle(t *testing.T) {
	th := newLoginThrottle()
	for i := 0; i < freeLogins; i++ {
		if d := th.delay("10.0.0.1"); d != 0 {
			t.Fatalf("attempt %d delayed %v", i, d)
		}
		th.failed("10.0.0.1")
	}
	var last time.Duration
	for i := 0; i < 10; i++ {
		d := th.delay("10.0.0.1")
		if d < last || d == 0 || d > maxLoginDelay {
			t.Fatalf("after %d more failures: delay %v (previous %v)", i, d, last)
		}
		last = d
		th.failed("10.0.0.1")
	}
	if last != maxLoginDelay {
		t.Errorf("delay capped at %v, want %v", last, maxLoginDelay)
	}
	if d := th.delay("10.0.0.2"); d != 0 {
		t.Errorf("another address is delayed %v", d)
	}
	th.succeeded("10.0.0.1")
	if d := th.delay("10.0.0.1"); d != 0 {
		t.Errorf("delay %v after a successful login", d)
	}
}
