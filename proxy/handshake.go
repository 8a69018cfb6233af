package proxy

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// serverCaps are the capabilities lockproxy offers clients. Those a client
// takes that shape the wire format or the semantics of results are mirrored
// on the session's backend connection (see backendCaps), so packets can be
// relayed unchanged.
const serverCaps = mysql.CLIENT_LONG_PASSWORD | mysql.CLIENT_FOUND_ROWS | mysql.CLIENT_LONG_FLAG |
	mysql.CLIENT_CONNECT_WITH_DB | mysql.CLIENT_LOCAL_FILES | mysql.CLIENT_IGNORE_SPACE |
	mysql.CLIENT_PROTOCOL_41 | mysql.CLIENT_INTERACTIVE | mysql.CLIENT_TRANSACTIONS |
	mysql.CLIENT_SECURE_CONNECTION | mysql.CLIENT_MULTI_STATEMENTS | mysql.CLIENT_MULTI_RESULTS |
	mysql.CLIENT_PS_MULTI_RESULTS | mysql.CLIENT_PLUGIN_AUTH | mysql.CLIENT_CONNECT_ATTRS |
	mysql.CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA | mysql.CLIENT_SESSION_TRACK | mysql.CLIENT_DEPRECATE_EOF |
	mysql.CLIENT_COMPRESS | mysql.CLIENT_CAN_HANDLE_EXPIRED_PASSWORDS

// mirroredCaps are the client capabilities a backend connection must share
// with its client for relayed packets to mean the same thing.
const mirroredCaps = mysql.CLIENT_FOUND_ROWS | mysql.CLIENT_IGNORE_SPACE | mysql.CLIENT_MULTI_STATEMENTS |
	mysql.CLIENT_MULTI_RESULTS | mysql.CLIENT_PS_MULTI_RESULTS | mysql.CLIENT_LOCAL_FILES |
	mysql.CLIENT_SESSION_TRACK | mysql.CLIENT_DEPRECATE_EOF | mysql.CLIENT_INTERACTIVE |
	mysql.CLIENT_CAN_HANDLE_EXPIRED_PASSWORDS

// defaultCollation is announced in the initial handshake (utf8mb4_general_ci).
const defaultCollation = 45

// handshakeResponse is what a client said in its HandshakeResponse41.
type handshakeResponse struct {
	caps      uint32
	collation uint8
	user      string
	auth      []byte
	db        string
	plugin    string
	attrs     connAttrs
	ext       uint32 // MariaDB's extended capabilities (extCapsAt)
}

// newSalt returns a 20-byte scramble of printable bytes, as MySQL servers send.
func newSalt() ([]byte, error) {
	salt := make([]byte, 20)
	if _, err := rand.Read(salt); err != nil {
		return nil, err
	}
	for i, b := range salt {
		b = 0x21 + b%(0x7e-0x21)
		if b == '$' {
			b = '#'
		}
		salt[i] = b
	}
	return salt, nil
}

// initialHandshake encodes the server's HandshakeV10 packet. ext are
// MariaDB's extended capabilities it offers (mariadbcaps.go): with any,
// CLIENT_MYSQL is left out, as MariaDB leaves it out, so that clients
// read them.
func initialHandshake(version string, connID uint32, salt []byte, caps, ext uint32, plugin string) []byte {
	if ext != 0 {
		caps &^= clientMySQL
	}
	b := make([]byte, 0, 128)
	b = append(b, 10)
	b = append(b, version...)
	b = append(b, 0)
	b = binary.LittleEndian.AppendUint32(b, connID)
	b = append(b, salt[:8]...)
	b = append(b, 0)
	b = binary.LittleEndian.AppendUint16(b, uint16(caps))
	b = append(b, defaultCollation)
	b = binary.LittleEndian.AppendUint16(b, mysql.SERVER_STATUS_AUTOCOMMIT)
	b = binary.LittleEndian.AppendUint16(b, uint16(caps>>16))
	b = append(b, byte(len(salt)+1))
	b = append(b, make([]byte, 6)...) // reserved
	b = binary.LittleEndian.AppendUint32(b, ext)
	b = append(b, salt[8:]...)
	b = append(b, 0)
	b = append(b, plugin...)
	return append(b, 0)
}

var errHandshake = errors.New("proxy: malformed handshake response")

// isSSLRequest reports whether a handshake response is the short SSLRequest.
func isSSLRequest(p []byte) bool {
	return len(p) == 32 && binary.LittleEndian.Uint32(p)&mysql.CLIENT_SSL != 0
}

// parseHandshakeResponse decodes a HandshakeResponse41 payload.
func parseHandshakeResponse(p []byte) (*handshakeResponse, error) {
	if len(p) < 32 {
		return nil, errHandshake
	}
	r := &handshakeResponse{caps: binary.LittleEndian.Uint32(p)}
	if r.caps&mysql.CLIENT_PROTOCOL_41 == 0 {
		return nil, fmt.Errorf("%w: client does not speak protocol 4.1", errHandshake)
	}
	r.collation = p[8]
	r.ext = extCapsAt(p)
	pos := 32
	user, pos, err := readNulString(p, pos)
	if err != nil {
		return nil, err
	}
	r.user = user
	switch {
	case r.caps&mysql.CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA != 0:
		r.auth, pos, err = readLenEncString(p, pos)
	case r.caps&mysql.CLIENT_SECURE_CONNECTION != 0:
		if pos >= len(p) || pos+1+int(p[pos]) > len(p) {
			return nil, errHandshake
		}
		r.auth, pos = p[pos+1:pos+1+int(p[pos])], pos+1+int(p[pos])
	default:
		var s string
		s, pos, err = readNulString(p, pos)
		r.auth = []byte(s)
	}
	if err != nil {
		return nil, errHandshake
	}
	if r.caps&mysql.CLIENT_CONNECT_WITH_DB != 0 && pos < len(p) {
		if r.db, pos, err = readNulString(p, pos); err != nil {
			return nil, err
		}
	}
	if r.caps&mysql.CLIENT_PLUGIN_AUTH != 0 && pos < len(p) {
		if r.plugin, pos, err = readNulString(p, pos); err != nil {
			// Some clients end the packet without the terminating NUL.
			r.plugin, pos = string(p[pos:]), len(p)
		}
	}
	if r.caps&mysql.CLIENT_CONNECT_ATTRS != 0 && pos < len(p) {
		r.attrs = parseConnAttrs(p[pos:])
	}
	return r, nil
}

func readNulString(p []byte, pos int) (string, int, error) {
	if pos > len(p) {
		return "", pos, errHandshake
	}
	i := bytes.IndexByte(p[pos:], 0)
	if i < 0 {
		return "", pos, errHandshake
	}
	return string(p[pos : pos+i]), pos + i + 1, nil
}

// checkAuth verifies a client's scramble for plugin against the password.
// lockproxy knows each user's password, so caching_sha2_password always
// takes the fast path: the scramble proves the password without sending it.
func checkAuth(plugin string, salt, resp []byte, password string) bool {
	var want []byte
	switch plugin {
	case mysql.AUTH_NATIVE_PASSWORD:
		want = mysql.CalcNativePassword(salt, []byte(password))
	case mysql.AUTH_CACHING_SHA2_PASSWORD:
		want = mysql.CalcCachingSha2Password(salt, []byte(password))
	default:
		return false
	}
	if password == "" {
		return len(resp) == 0 || (len(resp) == 1 && resp[0] == 0)
	}
	return len(want) == len(resp) && subtle.ConstantTimeCompare(want, resp) == 1
}

// authSwitchRequest asks the client to answer again with plugin.
func authSwitchRequest(plugin string, salt []byte) []byte {
	b := make([]byte, 0, 2+len(plugin)+len(salt)+1)
	b = append(b, mysql.EOF_HEADER)
	b = append(b, plugin...)
	b = append(b, 0)
	b = append(b, salt...)
	return append(b, 0)
}

// supportedPlugin reports whether lockproxy can verify answers for plugin.
func supportedPlugin(plugin string) bool {
	return plugin == mysql.AUTH_NATIVE_PASSWORD || plugin == mysql.AUTH_CACHING_SHA2_PASSWORD
}

// upgradeTLS turns the client connection into a TLS server connection.
func (s *session) upgradeTLS(cfg *tls.Config) error {
	if cfg == nil {
		return errorf(errHandshake, "TLS is not configured on this proxy")
	}
	// The client starts its TLS handshake right after the SSLRequest; bytes
	// of it the packet reader has already buffered must reach TLS first.
	raw := s.conn
	if n := s.cr.buffered(); n > 0 {
		early, _ := s.cr.r.Peek(n)
		raw = &prefixConn{Conn: s.conn, r: io.MultiReader(bytes.NewReader(append([]byte(nil), early...)), s.conn)}
	}
	tc := tls.Server(raw, cfg)
	if err := tc.Handshake(); err != nil {
		return err
	}
	s.srv.setConn(s, tc)
	s.cr = newPacketReader(tc, clientBufSize)
	s.cr.mem = s.mem
	s.cw = newPacketWriter(tc, clientBufSize)
	s.tls = true
	return nil
}

// setConn replaces the client connection with a layer over it (TLS,
// compression). The server reads sessions' connections under its mutex
// (shutdown, idle sessions), so the change is made under it too.
func (s *Server) setConn(sess *session, c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess.conn = c
}

// prefixConn is a net.Conn whose reads first return bytes already taken
// off the socket.
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixConn) Read(b []byte) (int, error) { return c.r.Read(b) }
