package proxy

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"net"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/pingcap/tidb/pkg/parser/charset"
)

// Relayed logins: backend connections of accounts read from the primary
// (users.from_backend, accounts.go).
//
// lockproxy does not know such an account's password, only what the
// client's mysql_native_password answer proved: stage1 = SHA1(password),
// recovered from the answer with the account's stored hash
// SHA1(stage1). stage1 is all a native answer needs, for any scramble, so
// lockproxy logs in to the backend as the account with it: the connection
// is opened as lockproxy's own account (the first of users:), whose
// greeting carries the scramble, and then COM_CHANGE_USER makes it the
// account's, answered with stage1 XOR SHA1(scramble + SHA1(stage1)).
// MariaDB checks that answer as it checks any login (host, password,
// locked or expired account, max_user_connections), so it stays the judge
// of who may log in: a pooled connection is logged in again in the same
// way each time a session takes it (pool.get), never handed over on
// lockproxy's word alone.
//
// stage1 is kept in the session and in the pool keys of its connections,
// for as long as they may need to log in again, and is never logged.
//
// An account lockproxy cannot check (ed25519, alone or in a chain with
// mysql_native_password) has its login passed: the same COM_CHANGE_USER
// names no plugin, and each request MariaDB makes goes to the client and
// its answer back (session.passLogin). Nothing it proved can log in
// again, so that connection is its session's alone.

// relayedLogin is how a connection logs in as an account read from the
// primary. The zero value is a login with the user and password of the
// poolKey itself.
type relayedLogin struct {
	on bool
	// passed: the client itself answered the backend's login, relayed
	// packet for packet (an account lockproxy cannot check, such as
	// ed25519: passLogin); the connection cannot log in again and is
	// never pooled.
	passed bool
	// stage1 is SHA1(password); empty for an account without password.
	stage1 string
	// viaUser and viaPassword open the connection: lockproxy's own
	// account.
	viaUser, viaPassword string
}

// nativeAnswer is the mysql_native_password answer to scramble of a
// client that knows stage1 = SHA1(password): stage1 XOR SHA1(scramble +
// SHA1(stage1)); empty for an account without password.
func nativeAnswer(scramble []byte, stage1 string) []byte {
	if stage1 == "" {
		return nil
	}
	hash := sha1.Sum([]byte(stage1))
	h := sha1.New()
	h.Write(scramble)
	h.Write(hash[:])
	x := h.Sum(nil)
	for i := range x {
		x[i] ^= stage1[i]
	}
	return x
}

// greetingTap passes a new backend connection's bytes through and keeps
// the scramble of the server's greeting (the first packet), which the
// relayed login answers.
type greetingTap struct {
	net.Conn
	buf      []byte
	scramble []byte // set (maybe empty) once the greeting has been read
}

func (t *greetingTap) Read(p []byte) (int, error) {
	n, err := t.Conn.Read(p)
	if t.scramble == nil && n > 0 {
		t.buf = append(t.buf, p[:n]...)
		if len(t.buf) >= 4 {
			size := int(t.buf[0]) | int(t.buf[1])<<8 | int(t.buf[2])<<16
			if len(t.buf) >= 4+size {
				t.scramble = greetingScramble(t.buf[4 : 4+size])
				t.buf = nil
			}
		}
	}
	return n, err
}

// greetingScramble returns the 20-byte scramble of a HandshakeV10
// payload, or an empty slice when there is none.
func greetingScramble(p []byte) []byte {
	none := []byte{}
	if len(p) < 1 || p[0] != 10 {
		return none
	}
	end := bytes.IndexByte(p[1:], 0)
	if end < 0 {
		return none
	}
	pos := 1 + end + 1 + 4 // version, NUL, thread id
	// scramble part 1 (8), filler (1), capabilities (2), collation (1),
	// status (2), capabilities (2), scramble length (1), reserved (10)
	if len(p) < pos+8+1+2+1+2+2+1+10+12 {
		return none
	}
	s := append([]byte(nil), p[pos:pos+8]...)
	pos += 8 + 1 + 2 + 1 + 2 + 2 + 1 + 10
	return append(s, p[pos:pos+12]...)
}

// relayLogin makes b, opened as lockproxy's own account, the key's
// account: COM_CHANGE_USER with the answer made from stage1, then what a
// login gives a session that a change of user takes away (IGNORE_SPACE).
// The backend's refusal (1045, 4151 ...) is returned as it sent it.
//
// With converse (a passed login), every request of the backend's
// authentication (an AuthSwitchRequest, AuthMoreData) goes to the client
// and its answer to the backend, until MariaDB accepts or refuses; the
// COM_CHANGE_USER names no plugin of MariaDB's, so the account's first
// plugin asks first.
func (b *backendConn) relayLogin(converse func([]byte) ([]byte, error)) error {
	k := b.key
	if len(b.scramble) != 20 {
		b.broken = true
		return fmt.Errorf("proxy: the primary's greeting has no mysql_native_password scramble")
	}
	cu := changeUserPacket(k, nativeAnswer(b.scramble, k.relay.stage1))
	if converse != nil {
		cu = changeUserPacketAs(k, nil, passedPlugin)
	}
	if err := b.writeCommand(cu); err != nil {
		return err
	}
	for exchange := 0; ; exchange++ {
		switched := exchange > 0
		seq, p, err := b.r.readPhysical()
		if err != nil {
			b.broken = true
			return err
		}
		switch {
		case len(p) > 0 && p[0] == mysql.OK_HEADER:
			if st, ok := okStatus(p); ok {
				b.status = st
			}
			b.dbDirty = false
			if k.caps&mysql.CLIENT_IGNORE_SPACE != 0 {
				return b.simpleCommand(append([]byte{mysql.COM_QUERY}, restoreIgnoreSpace...))
			}
			return nil
		case len(p) > 0 && p[0] == mysql.ERR_HEADER:
			b.broken = true // the connection is no one's now
			return parseErrPayload(p)
		case len(p) > 0 && (p[0] == mysql.EOF_HEADER || p[0] == authMoreData) && converse != nil && exchange < maxPassedExchanges:
			answer, err := converse(p)
			if err != nil {
				b.broken = true
				return err
			}
			if _, err := b.w.writePacket(seq+1, answer); err != nil {
				b.broken = true
				return err
			}
			if err := b.w.flush(); err != nil {
				b.broken = true
				return err
			}
		case len(p) > 0 && p[0] == mysql.EOF_HEADER && !switched && converse == nil:
			// An auth switch: a fresh scramble to answer.
			plugin, data, _ := bytes.Cut(p[1:], []byte{0})
			if string(plugin) != mysql.AUTH_NATIVE_PASSWORD || len(data) < 20 {
				b.broken = true
				return errorf(errAuthMode, "the primary asks %q for user '%s', which lockproxy cannot answer for an account read from the primary", plugin, k.user)
			}
			b.scramble = append(b.scramble[:0], data[:20]...)
			if _, err := b.w.writePacket(seq+1, nativeAnswer(b.scramble, k.relay.stage1)); err != nil {
				b.broken = true
				return err
			}
			if err := b.w.flush(); err != nil {
				b.broken = true
				return err
			}
		default:
			b.broken = true
			return fmt.Errorf("proxy: unexpected reply 0x%x to a change of user", p[0])
		}
	}
}

// changeUserPacket encodes the COM_CHANGE_USER that logs a connection of
// key in as key's account with answer: the database, collation and
// connection attributes a fresh login of key would give (the connection
// was opened with CLIENT_SECURE_CONNECTION, CLIENT_PLUGIN_AUTH and
// CLIENT_CONNECT_ATTRS, so MariaDB reads each field).
func changeUserPacket(k poolKey, answer []byte) []byte {
	return changeUserPacketAs(k, answer, mysql.AUTH_NATIVE_PASSWORD)
}

// passedPlugin is the plugin a passed login's COM_CHANGE_USER names: none
// of MariaDB's, so that it asks with the account's first plugin.
const passedPlugin = "lockproxy_passed"

// maxPassedExchanges bounds the requests of one passed login (MariaDB's
// chains of plugins, IDENTIFIED VIA ... OR ..., take one each).
const maxPassedExchanges = 16

// changeUserPacketAs is changeUserPacket naming plugin.
func changeUserPacketAs(k poolKey, answer []byte, plugin string) []byte {
	b := make([]byte, 0, 64+len(k.user)+len(k.db)+len(k.attrs))
	b = append(b, mysql.COM_CHANGE_USER)
	b = append(b, k.user...)
	b = append(b, 0, byte(len(answer)))
	b = append(b, answer...)
	b = append(b, k.db...)
	b = append(b, 0)
	b = binary.LittleEndian.AppendUint16(b, uint16(backendCollation(k.collation)))
	b = append(b, plugin...)
	b = append(b, 0)
	var attrs []byte
	for name, value := range k.attrs.backend() {
		attrs = appendLenEncString(attrs, name)
		attrs = appendLenEncString(attrs, value)
	}
	b = appendLenEncInt(b, uint64(len(attrs)))
	return append(b, attrs...)
}

// backendCollation is the collation id a backend connection of a client
// with collation id is opened with: the client's, or utf8mb4_general_ci
// for one outside the one-byte range lockproxy knows.
func backendCollation(id uint8) int {
	if c, err := charset.GetCollationByID(int(id)); err == nil && c.ID < 256 {
		return c.ID
	}
	return defaultCollation
}
