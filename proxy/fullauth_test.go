package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/rules"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
)

// startSha2Proxy serves a proxy announcing caching_sha2_password that also
// offers TLS.
func startSha2Proxy(t *testing.T) *testProxy {
	t.Helper()
	bed := testbed.Get(t)
	cert, key := selfSigned(t)
	yaml := fmt.Sprintf("proxy: {handshake_timeout: 5s, tls: {cert: %q, key: %q}}\n"+
		"users: [{user: %s, password: %q}]\nbackends: {primary: '%s'}\nlocks: {backend: memory}\n",
		cert, key, bed.User, bed.Password, bed.PrimaryAddr)
	cfg, err := rules.LoadBytes("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	reg := prometheus.NewRegistry()
	return serveProxy(t, bed, cfg, Options{AuthPlugin: mysql.AUTH_CACHING_SHA2_PASSWORD, Logger: zaptest.NewLogger(t), Registry: reg}, reg)
}

// handClient logs in by hand, packet by packet, to see every step of the
// authentication exchange.
type handClient struct {
	t    *testing.T
	conn net.Conn
	seq  byte
	salt []byte
}

func dialHand(t *testing.T, addr string) *handClient {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	h := &handClient{t: t, conn: c}
	g := h.read()
	// version, NUL, connection id, salt part 1, filler, caps, charset,
	// status, caps, salt length, reserved, salt part 2
	pos := bytes.IndexByte(g[1:], 0) + 2 + 4
	h.salt = append([]byte(nil), g[pos:pos+8]...)
	pos += 8 + 1 + 2 + 1 + 2 + 2 + 1 + 10
	h.salt = append(h.salt, g[pos:pos+12]...)
	return h
}

func (h *handClient) write(payload []byte) {
	h.t.Helper()
	hdr := binary.LittleEndian.AppendUint32(nil, uint32(len(payload)))
	hdr[3] = h.seq
	h.seq++
	if _, err := h.conn.Write(append(hdr, payload...)); err != nil {
		h.t.Fatalf("write: %v", err)
	}
}

func (h *handClient) read() []byte {
	h.t.Helper()
	var hdr [4]byte
	if _, err := io.ReadFull(h.conn, hdr[:]); err != nil {
		h.t.Fatalf("read: %v", err)
	}
	p := make([]byte, int(hdr[0])|int(hdr[1])<<8|int(hdr[2])<<16)
	if _, err := io.ReadFull(h.conn, p); err != nil {
		h.t.Fatalf("read: %v", err)
	}
	h.seq = hdr[3] + 1
	return p
}

const handCaps = mysql.CLIENT_PROTOCOL_41 | mysql.CLIENT_SECURE_CONNECTION | mysql.CLIENT_PLUGIN_AUTH |
	mysql.CLIENT_LONG_PASSWORD | mysql.CLIENT_TRANSACTIONS | mysql.CLIENT_DEPRECATE_EOF

// startTLS sends an SSLRequest and turns the connection into TLS.
func (h *handClient) startTLS() {
	h.t.Helper()
	b := binary.LittleEndian.AppendUint32(nil, handCaps|mysql.CLIENT_SSL)
	b = binary.LittleEndian.AppendUint32(b, 1<<24)
	b = append(b, 45)
	h.write(append(b, make([]byte, 23)...))
	tc := tls.Client(h.conn, &tls.Config{InsecureSkipVerify: true})
	if err := tc.Handshake(); err != nil {
		h.t.Fatalf("TLS: %v", err)
	}
	h.conn = tc
}

// login sends a HandshakeResponse41 answering with caching_sha2_password.
func (h *handClient) login(user string, scramble []byte, tlsOn bool) {
	h.loginWith(mysql.AUTH_CACHING_SHA2_PASSWORD, user, scramble, tlsOn)
}

// loginWith sends a HandshakeResponse41 answering with plugin.
func (h *handClient) loginWith(plugin, user string, scramble []byte, tlsOn bool) {
	caps := uint32(handCaps)
	if tlsOn {
		caps |= mysql.CLIENT_SSL
	}
	b := binary.LittleEndian.AppendUint32(nil, caps)
	b = binary.LittleEndian.AppendUint32(b, 1<<24)
	b = append(b, 45)
	b = append(b, make([]byte, 23)...)
	b = append(append(b, user...), 0)
	b = append(append(b, byte(len(scramble))), scramble...)
	h.write(append(append(b, plugin...), 0))
}

// fullAuthAsked reads the server's answer to a scramble and fails unless it
// asks for full authentication.
func (h *handClient) fullAuthAsked() {
	h.t.Helper()
	if p := h.read(); !bytes.Equal(p, []byte{authMoreData, sha2PerformFullAuth}) {
		h.t.Fatalf("after a wrong scramble: % x, want perform-full-authentication (01 04)", p)
	}
}

// sendEncrypted asks for the server's RSA key, then sends password
// encrypted with it, as clients do on a connection without TLS.
func (h *handClient) sendEncrypted(password string) {
	h.t.Helper()
	h.write([]byte{sha2RequestPublicKey})
	p := h.read()
	if len(p) < 2 || p[0] != authMoreData {
		h.t.Fatalf("public key request answered with % x", p)
	}
	block, _ := pem.Decode(p[1:])
	if block == nil || block.Type != "PUBLIC KEY" {
		h.t.Fatalf("not a PEM public key: %q", p[1:])
	}
	k, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		h.t.Fatal(err)
	}
	plain := append([]byte(password), 0)
	for i := range plain {
		plain[i] ^= h.salt[i%len(h.salt)]
	}
	enc, err := rsa.EncryptOAEP(sha1.New(), rand.Reader, k.(*rsa.PublicKey), plain, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	h.write(enc)
}

// outcome reads the final answer: "" for OK, else the error's code and message.
func (h *handClient) outcome() string {
	h.t.Helper()
	p := h.read()
	switch {
	case len(p) > 0 && p[0] == mysql.OK_HEADER:
		return ""
	case len(p) > 9 && p[0] == mysql.ERR_HEADER:
		return fmt.Sprintf("%d %s", binary.LittleEndian.Uint16(p[1:]), p[9:])
	}
	h.t.Fatalf("unexpected reply % x", p)
	return ""
}

// ping checks that the session serves commands after the login.
func (h *handClient) ping() {
	h.t.Helper()
	h.seq = 0
	h.write([]byte{mysql.COM_PING})
	if p := h.read(); len(p) == 0 || p[0] != mysql.OK_HEADER {
		h.t.Fatalf("COM_PING after login: % x", p)
	}
}

// wrongScramble is a 32-byte answer no password produces.
var wrongScramble = bytes.Repeat([]byte{0x5a}, 32)

// TestCachingSha2FullAuth drives caching_sha2_password's full
// authentication by hand: a scramble that does not prove the password
// leads to it, and the password then sent decides, in clear over TLS and
// RSA-encrypted without.
func TestCachingSha2FullAuth(t *testing.T) {
	p := startSha2Proxy(t)
	user, pw := p.bed.User, p.bed.Password
	denied := func(t *testing.T, got string) {
		t.Helper()
		if !strings.HasPrefix(got, "1045 lockproxy: Access denied for user") {
			t.Errorf("got %q, want 1045 from lockproxy", got)
		}
	}

	t.Run("fast_auth", func(t *testing.T) {
		h := dialHand(t, p.addr)
		h.login(user, mysql.CalcCachingSha2Password(h.salt, []byte(pw)), false)
		if got := h.read(); !bytes.Equal(got, []byte{authMoreData, mysql.CACHE_SHA2_FAST_AUTH}) {
			t.Fatalf("after a right scramble: % x, want fast-auth-success (01 03)", got)
		}
		if got := h.outcome(); got != "" {
			t.Fatalf("login: %s", got)
		}
		h.ping()
	})
	t.Run("rsa_right_password", func(t *testing.T) {
		h := dialHand(t, p.addr)
		h.login(user, wrongScramble, false)
		h.fullAuthAsked()
		h.sendEncrypted(pw)
		if got := h.outcome(); got != "" {
			t.Fatalf("login: %s", got)
		}
		h.ping()
	})
	t.Run("tls_right_password", func(t *testing.T) {
		h := dialHand(t, p.addr)
		h.startTLS()
		h.login(user, wrongScramble, true)
		h.fullAuthAsked()
		h.write(append([]byte(pw), 0))
		if got := h.outcome(); got != "" {
			t.Fatalf("login: %s", got)
		}
		h.ping()
	})
	// Failures come last and stay within the free attempts per account
	// and address, so login throttling does not slow the test.
	t.Run("rsa_wrong_password", func(t *testing.T) {
		h := dialHand(t, p.addr)
		h.login(user, wrongScramble, false)
		h.fullAuthAsked()
		h.sendEncrypted(pw + "x")
		denied(t, h.outcome())
	})
	t.Run("cleartext_without_tls", func(t *testing.T) {
		h := dialHand(t, p.addr)
		h.login(user, wrongScramble, false)
		h.fullAuthAsked()
		h.write(append([]byte(pw), 0))
		denied(t, h.outcome())
	})
	t.Run("tls_wrong_password", func(t *testing.T) {
		h := dialHand(t, p.addr)
		h.startTLS()
		h.login(user, wrongScramble, true)
		h.fullAuthAsked()
		h.write([]byte("wrong\x00"))
		denied(t, h.outcome())
	})
	t.Run("unknown_user", func(t *testing.T) {
		// Same exchange as for a known user: the replies do not tell.
		h := dialHand(t, p.addr)
		h.startTLS()
		h.login("no_such_user", wrongScramble, true)
		h.fullAuthAsked()
		h.write(append([]byte(pw), 0))
		denied(t, h.outcome())
	})
}

// TestCachingSha2FullAuthChangeUser: COM_CHANGE_USER with a scramble that
// does not match goes through full authentication too.
func TestCachingSha2FullAuthChangeUser(t *testing.T) {
	p := startSha2Proxy(t)
	h := dialHand(t, p.addr)
	h.login(p.bed.User, mysql.CalcCachingSha2Password(h.salt, []byte(p.bed.Password)), false)
	h.read() // fast auth success
	if got := h.outcome(); got != "" {
		t.Fatalf("login: %s", got)
	}
	h.seq = 0
	b := append([]byte{mysql.COM_CHANGE_USER}, p.bed.User...)
	b = append(append(b, 0, byte(len(wrongScramble))), wrongScramble...)
	b = append(b, 0, 45, 0) // no database, utf8mb4_general_ci
	b = append(append(b, mysql.AUTH_CACHING_SHA2_PASSWORD...), 0)
	h.write(b)
	h.fullAuthAsked()
	h.sendEncrypted(p.bed.Password)
	if got := h.outcome(); got != "" {
		t.Fatalf("COM_CHANGE_USER: %s", got)
	}
	h.ping()
}

// TestAuthSwitchToClientPlugin: a client answering with another plugin
// than the one announced sends an empty placeholder (libmariadb and
// libmysqlclient do, e.g. `mariadb --default-auth=...`); lockproxy asks
// again with the client's plugin and the same scramble, as MySQL does.
func TestAuthSwitchToClientPlugin(t *testing.T) {
	sha2 := startSha2Proxy(t)
	native := startProxyOpts(t, Options{})
	cases := []struct {
		name   string
		addr   string
		plugin string
		answer func(salt []byte, pw string) []byte
		fast   bool // caching_sha2_password: fast-auth success precedes the OK
	}{
		{"native_on_sha2", sha2.addr, mysql.AUTH_NATIVE_PASSWORD,
			func(salt []byte, pw string) []byte { return mysql.CalcNativePassword(salt, []byte(pw)) }, false},
		{"sha2_on_native", native.addr, mysql.AUTH_CACHING_SHA2_PASSWORD,
			func(salt []byte, pw string) []byte { return mysql.CalcCachingSha2Password(salt, []byte(pw)) }, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bed := sha2.bed
			h := dialHand(t, c.addr)
			h.loginWith(c.plugin, bed.User, nil, false)
			p := h.read()
			want := append(append([]byte{mysql.EOF_HEADER}, c.plugin...), 0)
			want = append(append(want, h.salt...), 0)
			if !bytes.Equal(p, want) {
				t.Fatalf("after an empty %s answer: % x, want an AuthSwitchRequest to it with the greeting's scramble", c.plugin, p)
			}
			h.write(c.answer(h.salt, bed.Password))
			if c.fast {
				if got := h.read(); !bytes.Equal(got, []byte{authMoreData, mysql.CACHE_SHA2_FAST_AUTH}) {
					t.Fatalf("after the switch: % x, want fast-auth-success", got)
				}
			}
			if got := h.outcome(); got != "" {
				t.Fatalf("login: %s", got)
			}
			h.ping()
		})
	}
}

// TestMariaDBCLIAuthPlugins: the mariadb CLI logs in whichever plugin it
// starts with and lockproxy announces, and a wrong password gets
// lockproxy's 1045 either way (after full authentication for
// caching_sha2_password).
func TestMariaDBCLIAuthPlugins(t *testing.T) {
	cli := requireTool(t, "mariadb", "--version")
	sha2 := startSha2Proxy(t)
	native := startProxyOpts(t, Options{})
	bed := sha2.bed
	for _, p := range []struct{ name, addr string }{{"announce_native", native.addr}, {"announce_sha2", sha2.addr}} {
		host, port, _ := net.SplitHostPort(p.addr)
		for _, plugin := range []string{mysql.AUTH_NATIVE_PASSWORD, mysql.AUTH_CACHING_SHA2_PASSWORD} {
			for _, pw := range []string{bed.Password, "wrong-password"} {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				out, err := exec.CommandContext(ctx, cli, "-h"+host, "-P"+port, "-u"+bed.User, "-p"+pw,
					"--default-auth="+plugin, "--batch", "--skip-column-names", "-e", "SELECT CURRENT_USER()").CombinedOutput()
				cancel()
				got := strings.TrimSpace(string(out))
				if pw == bed.Password {
					if err != nil || !strings.HasPrefix(got, bed.User+"@") {
						t.Errorf("%s, client %s: %v: %s", p.name, plugin, err, got)
					}
				} else if err == nil || !strings.HasPrefix(got, "ERROR 1045 (28000): lockproxy: Access denied") {
					t.Errorf("%s, client %s, wrong password: %v: %s", p.name, plugin, err, got)
				}
			}
		}
	}
}
