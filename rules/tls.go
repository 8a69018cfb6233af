package rules

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
)

// Load reads the files of t into a *tls.Config for a client (TLS 1.2 or
// later). A nil t gives nil: no TLS. The result names no server: use
// ForAddr for each address dialled.
func (t *TLSClientConfig) Load() (*tls.Config, error) {
	if t == nil {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.SkipVerify} //nolint:gosec // skip_verify is the user's explicit choice
	if t.CA != "" {
		pem, err := os.ReadFile(t.CA)
		if err != nil {
			return nil, fmt.Errorf("rules: tls ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("rules: tls ca %s: no PEM certificate in it", t.CA)
		}
		c.RootCAs = pool
	}
	if t.Cert != "" || t.Key != "" {
		cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			return nil, fmt.Errorf("rules: tls cert and key: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// ForAddr returns base for dialling addr (host:port): a copy naming the
// host as the server when base names none. nil stays nil.
func ForAddr(base *tls.Config, addr string) *tls.Config {
	if base == nil || base.ServerName != "" {
		return base
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	c := base.Clone()
	c.ServerName = host
	return c
}
