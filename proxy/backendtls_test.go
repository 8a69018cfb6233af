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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/lockproxy/lockproxy/rules"
)

// tlsUserDSN is a DSN through p as the bed's TLS-only user.
func tlsUserDSN(p *testProxy) string {
	c := mysql.NewConfig()
	c.Net, c.Addr, c.User, c.Passwd = "tcp", p.addr, p.bed.TLSUser, p.bed.Password
	c.Timeout = 5 * time.Second
	return c.FormatDSN()
}

// tlsUserLogin tries to log in through p as the bed's TLS-only user.
func tlsUserLogin(t *testing.T, p *testProxy) error {
	t.Helper()
	db, err := sql.Open("mysql", tlsUserDSN(p))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	return db.Ping()
}

// TestBackendTLS: with backends.tls, lockproxy's connections to the primary
// and the replicas use TLS, verified against the configured CA: a user
// MariaDB lets in only over TLS works through lockproxy, sessions and
// health checks alike; without it, or with another CA, that user cannot
// log in.
func TestBackendTLS(t *testing.T) {
	bed := testbedFor(t)
	if bed.TLSUser == "" || bed.TLSCA == "" {
		t.Fatal("the test bed has no TLS user or CA (scripts/testbed.sh up makes them)")
	}
	withTLS := func(ca string) func(*rules.Config) {
		return func(c *rules.Config) {
			c.Users = []rules.User{{User: bed.TLSUser, Password: bed.Password}}
			c.Backends.Replicas = []string{bed.ReplicaAddr}
			c.Backends.MaxReplicaLag = rules.Duration(2 * time.Second)
			if ca != "" {
				c.Backends.TLS = &rules.TLSClientConfig{CA: ca}
			}
		}
	}

	t.Run("verified", func(t *testing.T) {
		p := startProxy(t, withTLS(bed.TLSCA))
		db := openDB(t, tlsUserDSN(p))
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		var name, cipher string
		if err := tx.QueryRow("SHOW SESSION STATUS LIKE 'Ssl_cipher'").Scan(&name, &cipher); err != nil || cipher == "" {
			t.Fatalf("the primary session's Ssl_cipher = %q, %v; want a cipher", cipher, err)
		}
		// The replica serves reads once its TLS health check passes.
		deadline := time.Now().Add(10 * time.Second)
		for serverID(t, db, "SELECT @@server_id") != replicaID {
			if time.Now().After(deadline) {
				t.Fatal("no read reached the replica over TLS within 10s")
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	t.Run("no tls", func(t *testing.T) {
		p := startProxy(t, withTLS(""))
		if me := mysqlErr(t, tlsUserLogin(t, p)); me.Number != 1045 {
			t.Fatalf("a REQUIRE SSL user through a plain backend connection: want MariaDB's 1045, got %v", me)
		}
	})
	t.Run("another CA", func(t *testing.T) {
		p := startProxy(t, withTLS(otherCA(t)))
		err := tlsUserLogin(t, p)
		if err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
			t.Fatalf("a server whose certificate another CA signed: want a verification failure, got %v", err)
		}
	})
}

// otherCA writes a CA certificate that signed nothing of the bed's.
func otherCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "not the bed's CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
