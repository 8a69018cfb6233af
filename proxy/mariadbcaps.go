package proxy

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"sync"

	"github.com/go-mysql-org/go-mysql/mysql"
	"go.uber.org/zap"
)

// MariaDB's extended capabilities are the upper 32 bits of its 64-bit
// capability flags. The server carries them in the last 4 of the
// greeting's 10 reserved bytes, the client in bytes 28-31 of its handshake
// response (or SSLRequest), and each side reads them only when the other
// does not set CLIENT_MYSQL (bit 0, which MySQL calls
// CLIENT_LONG_PASSWORD). The constants are the bits of that upper half.
const (
	clientMySQL = mysql.CLIENT_LONG_PASSWORD

	// mariadbProgress: progress reports (ERR packets with code 0xFFFF in
	// the middle of a response). Not offered: lockproxy's relay would
	// take one for the statement's end.
	mariadbProgress uint32 = 1 << 0
	// mariadbBulk: COM_STMT_BULK_EXECUTE (bulk.go).
	mariadbBulk uint32 = 1 << 2
	// mariadbExtendedMetadata: every column definition carries, after
	// org_name, a length-encoded block of extended type information (the
	// type name json, uuid, inet6, point ...).
	mariadbExtendedMetadata uint32 = 1 << 3
	// mariadbCacheMetadata: a result set's column count is followed by a
	// byte saying whether column definitions follow, and MariaDB leaves
	// them out of a prepared statement's result when they are those it
	// sent that connection last. Not offered: lockproxy runs one client
	// statement on several backend connections (the primary, a replica,
	// its current-read twin, a copy prepared again after a replica
	// changed), so a backend's "unchanged" would speak of definitions it
	// sent, not of those the client holds.
	mariadbCacheMetadata uint32 = 1 << 4

	// relayedExtCaps are the extended capabilities lockproxy offers when
	// the primary offers them: each is negotiated on the client's backend
	// connections as the client negotiated it, and relayed unchanged.
	relayedExtCaps = mariadbBulk | mariadbExtendedMetadata
)

// extCapsAt reads the extended capabilities from a handshake response or
// SSLRequest payload p: 0 when the client sets CLIENT_MYSQL (it is not
// speaking MariaDB's extension) or the packet is too short.
func extCapsAt(p []byte) uint32 {
	if len(p) < 32 || binary.LittleEndian.Uint32(p)&clientMySQL != 0 {
		return 0
	}
	return binary.LittleEndian.Uint32(p[28:])
}

// greetingExtCaps reads the extended capabilities a server's greeting
// (HandshakeV10 payload) offers; 0 when it sets CLIENT_MYSQL.
func greetingExtCaps(p []byte) (uint32, bool) {
	if len(p) < 1 || p[0] != 10 {
		return 0, false
	}
	pos := 1
	for pos < len(p) && p[pos] != 0 {
		pos++
	}
	pos++ // the version's NUL
	// connection id, 8 bytes of scramble, filler, lower capabilities,
	// collation, status, upper capabilities, scramble length, 6 reserved.
	capsLo := pos + 4 + 8 + 1
	end := capsLo + 2 + 1 + 2 + 2 + 1 + 6 + 4
	if end > len(p) {
		return 0, false
	}
	if p[capsLo]&byte(clientMySQL) != 0 {
		return 0, true
	}
	return binary.LittleEndian.Uint32(p[end-4:]), true
}

// extCapsConn carries MariaDB's extended capabilities through go-mysql's
// login, which knows nothing of them: it reads the ones the server's
// greeting offers, and writes want into the client's first answer (the
// handshake response, or the SSLRequest MariaDB reads them from when the
// login is upgraded to TLS). After that it only passes bytes through.
type extCapsConn struct {
	net.Conn
	want uint32
	// caps are capabilities go-mysql cannot announce, added to the first
	// answer's (CLIENT_CAN_HANDLE_EXPIRED_PASSWORDS: MariaDB reads the
	// capabilities of a TLS login from its SSLRequest too).
	caps uint32

	mu      sync.Mutex
	greet   []byte // the greeting's bytes until it is whole
	offered uint32 // what the greeting offered
	known   bool   // offered has been read
	wrote   bool   // the first answer has gone
}

func (c *extCapsConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.known && n > 0 && len(c.greet) < 1<<12 {
		c.greet = append(c.greet, b[:n]...)
		if len(c.greet) >= 4 {
			size := int(c.greet[0]) | int(c.greet[1])<<8 | int(c.greet[2])<<16
			if len(c.greet) >= 4+size {
				c.offered, _ = greetingExtCaps(c.greet[4 : 4+size])
				c.known, c.greet = true, nil
			}
		}
	}
	return n, err
}

func (c *extCapsConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	first := !c.wrote
	c.wrote = true
	c.mu.Unlock()
	// go-mysql writes a packet whole: header, then payload. The first
	// packet it writes is sequence 1, the answer to the greeting.
	if first && (c.want != 0 || c.caps != 0) && len(b) >= 4+32 && b[3] == 1 {
		p := append([]byte(nil), b...)
		binary.LittleEndian.PutUint32(p[4:], binary.LittleEndian.Uint32(p[4:])|c.caps)
		if c.want != 0 {
			binary.LittleEndian.PutUint32(p[4+28:], c.want)
		}
		return c.Conn.Write(p)
	}
	return c.Conn.Write(b)
}

// serverExt is what the greeting offered.
func (c *extCapsConn) serverExt() uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offered
}

// checkExtCaps fails when the backend did not offer an extended capability
// the client negotiated: packets it sends would then not be those the
// client reads (a replica of an older version).
func checkExtCaps(want, offered uint32) error {
	if missing := want &^ offered; missing != 0 {
		return fmt.Errorf("proxy: the backend does not offer MariaDB's extended capabilities %#x, which the client negotiated", missing)
	}
	return nil
}

// extendedMetadata reports whether column definitions carry MariaDB's
// extended type information for a connection with extended capabilities
// ext.
func extendedMetadata(ext uint32) bool { return ext&mariadbExtendedMetadata != 0 }

// columnFixedAt returns the offset of a column definition's fixed-length
// fields (after the length byte 0x0c), skipping the six names and, with
// extended metadata, the extended type information; it also returns the
// column's name and org_name.
func columnFixedAt(p []byte, extended bool) (pos int, name, orgName []byte, err error) {
	n := 6 // catalog, schema, table, org_table, name, org_name
	if extended {
		n++
	}
	for f := 0; f < n && err == nil; f++ {
		var s []byte
		s, pos, err = readLenEncString(p, pos)
		switch f {
		case 4:
			name = s
		case 5:
			orgName = s
		}
	}
	if err != nil {
		return 0, nil, nil, err
	}
	_, pos, _, err = readLenEncInt(p, pos) // length of the fixed fields
	if err != nil {
		return 0, nil, nil, err
	}
	return pos, name, orgName, nil
}

// fallbackVersion is announced when the primary could not be asked for its own.
const fallbackVersion = "5.5.5-10.11.0-MariaDB-lockproxy"

// serverVersion is the version string lockproxy's greeting announces:
// the primary's, as probeVersion learnt it.
func (s *Server) serverVersion() string {
	if v, ok := s.version.Load().(string); ok && v != "" {
		return v
	}
	return fallbackVersion
}

// probeVersion asks the primary for its version string, which clients see
// in the greeting, so that feature detection works as it would directly.
func (s *Server) probeVersion(ctx context.Context) {
	cfg := s.config()
	if len(cfg.Users) == 0 {
		return
	}
	u := cfg.Users[0]
	b, err := dialBackend(ctx, poolKey{addr: cfg.Backends.Primary, user: u.User, password: u.Password, collation: defaultCollation, tls: s.loaded().backendTLS})
	if err != nil {
		s.log.Warn("cannot reach the primary to learn its version", zap.String("primary", cfg.Backends.Primary), zap.Error(err))
		return
	}
	v := b.version
	if len(v) > 0 && v[0] >= '1' && v[0] <= '9' && strings.Contains(v, "MariaDB") && !strings.HasPrefix(v, "5.5.5-") {
		v = "5.5.5-" + v
	}
	s.version.Store(v)
	s.noteBackendExtCaps(b.offeredExt)
	b.close()
}

// noteBackendExtCaps records the MariaDB extended capabilities the
// primary's greeting offers; greetings from then on offer those lockproxy
// relays (relayedExtCaps).
func (s *Server) noteBackendExtCaps(ext uint32) {
	s.backendExt.Store(uint64(ext) | 1<<32)
}

// offeredExtCaps are the MariaDB extended capabilities lockproxy's
// greeting offers: those it relays that the primary offered when last
// asked; none before it was.
func (s *Server) offeredExtCaps() uint32 {
	v := s.backendExt.Load()
	if v&(1<<32) == 0 {
		return 0
	}
	return uint32(v) & relayedExtCaps
}
