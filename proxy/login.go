package proxy

import (
	"errors"
	"net"

	"github.com/go-mysql-org/go-mysql/mysql"
	"go.uber.org/zap"
)

// The login: checking a client's answer (at login and COM_CHANGE_USER)
// against a user listed in users, or an account read from the primary
// (accounts.go), under the failed-login throttle (throttle.go).

// authenticate checks the client's answer, switching it to a plugin lockproxy
// can verify when needed. It returns the sequence id of the next packet.
// An account read from the primary (users.from_backend) is always asked
// for mysql_native_password, the only answer lockproxy can check against
// the hash the primary stores and log in to the backend with.
func (s *session) authenticate(seq byte, plugin string, auth []byte, want string) (byte, error) {
	l := login{srv: s.srv, cr: s.cr, cw: s.cw, tls: s.tls, salt: s.client.salt, user: s.user, refuse: s.writeErrAt}
	l.host, _, _ = net.SplitHostPort(s.conn.RemoteAddr().String())
	seq, err := l.run(seq, plugin, auth, want)
	if err != nil {
		return 0, err
	}
	s.client.password, s.client.stage1, s.client.relayed = l.password, l.stage1, l.relayed
	return seq, nil
}

// login checks one client's answer: at login and COM_CHANGE_USER.
type login struct {
	srv  *Server
	cr   *packetReader
	cw   *packetWriter
	tls  bool   // the client's connection is TLS
	salt []byte // the scramble's
	user string
	host string // the client's address without the port
	// refuse answers an error packet with the sequence id given.
	refuse func(seq byte, e error) error
	// What the login proved: the listed user's password, or the
	// stage1 of an account read from the primary (relayed).
	password string
	stage1   []byte
	relayed  bool
}

// run checks the client's answer to the greeting, auth in plugin, when
// lockproxy announced want.
func (l *login) run(seq byte, plugin string, auth []byte, want string) (byte, error) {
	named := plugin != "" // a client without CLIENT_PLUGIN_AUTH cannot be switched
	if !named {
		plugin = mysql.AUTH_NATIVE_PASSWORD
	}
	host := l.host
	turn, admitted := l.srv.logins.admit(l.user, host)
	if !admitted {
		l.srv.metrics.loginsThrottled.Inc()
		l.srv.audit.Debug("login refused: too many recent failed logins", zap.String("user", l.user), zap.String("client", host))
		e := errorf(errHostBlocked, "Host '%s' is blocked because of many failed logins; try again later", host)
		_ = l.refuse(seq, e)
		return 0, e
	}
	defer l.srv.logins.release(turn)
	u, known, relayed := l.srv.lookupUser(l.user)
	announced := want
	if relayed {
		want = mysql.AUTH_NATIVE_PASSWORD
	}
	// A client answering with another plugin than the one announced did not
	// compute its answer for the greeting (libmariadb and libmysqlclient
	// send an empty placeholder): ask again, as MySQL does, with the
	// client's plugin when lockproxy can verify it, else the announced one
	// (mysql_native_password for an account read from the primary).
	if !supportedPlugin(plugin) || (named && (plugin != want || plugin != announced)) {
		if supportedPlugin(plugin) && !relayed {
			want = plugin
		}
		var err error
		if seq, auth, err = l.askAgain(seq, want); err != nil {
			return 0, err
		}
		plugin = want
	}
	var stage1 []byte
	var refused error
	fast := false
	if relayed {
		stage1, refused = l.verifyRelayed(host, auth)
	} else {
		var err error
		if fast, seq, refused, err = l.verifyListed(seq, plugin, auth, u.Password, known); err != nil {
			return 0, err
		}
	}
	if refused != nil {
		return 0, l.failed(seq, host, turn, known || relayed, len(auth) == 0, refused)
	}
	l.password, l.stage1, l.relayed = u.Password, stage1, relayed
	l.srv.logins.succeeded(l.user, host, turn)
	if plugin == mysql.AUTH_CACHING_SHA2_PASSWORD && fast {
		if _, err := l.cw.writePacket(seq, []byte{authMoreData, mysql.CACHE_SHA2_FAST_AUTH}); err != nil {
			return 0, err
		}
		seq++
	}
	return seq, nil
}

// askAgain sends an AuthSwitchRequest for plugin with the session's
// scramble and returns the client's answer and the next sequence id.
func (l *login) askAgain(seq byte, plugin string) (byte, []byte, error) {
	if _, err := l.cw.writePacket(seq, authSwitchRequest(plugin, l.salt)); err != nil {
		return 0, nil, err
	}
	if err := l.cw.flush(); err != nil {
		return 0, nil, err
	}
	seq, p, err := l.cr.readLogical(4096)
	if err != nil {
		return 0, nil, err
	}
	return seq + 1, p, nil
}

// verifyListed checks the client's answer in plugin against the password
// of a user listed in users (known), with caching_sha2_password's full
// authentication when its scramble does not prove it. It returns whether
// the scramble proved it (fast), the next sequence id, and why the login
// is refused (nil: it is not); err is an I/O failure.
func (l *login) verifyListed(seq byte, plugin string, auth []byte, password string, known bool) (fast bool, next byte, refused, err error) {
	ok := known && checkAuth(plugin, l.salt, auth, password)
	fast = ok
	if !ok && plugin == mysql.AUTH_CACHING_SHA2_PASSWORD && len(auth) > 0 && !(len(auth) == 1 && auth[0] == 0) {
		if ok, seq, err = l.fullAuth(seq, known, password); err != nil {
			return false, 0, nil, err
		}
	}
	switch {
	case !known:
		refused = errNoAccount
	case !ok:
		refused = errWrongPassword
	}
	return fast, seq, refused, nil
}

// verifyRelayed checks the client's mysql_native_password answer against
// the account read from the primary and returns stage1. A refusal reads
// the accounts again (at most once per accountsRereadGap over all
// clients) and checks once more: the account may be new, or its password
// changed, since they were read.
func (l *login) verifyRelayed(host string, auth []byte) ([]byte, error) {
	stage1, err := l.srv.accounts.verify(l.user, host, l.salt, auth)
	if err == nil {
		return stage1, nil
	}
	if !l.srv.rereadAccounts() {
		return nil, err
	}
	return l.srv.accounts.verify(l.user, host, l.salt, auth)
}

// failed counts and logs a refused login and answers it: the
// reason's own words (an account lockproxy cannot serve), or MariaDB's
// access denied.
func (l *login) failed(seq byte, host string, turn loginTurn, known, noPassword bool, reason error) error {
	l.srv.metrics.authFailures.Inc()
	l.srv.logins.failed(l.user, host, turn)
	usingPw := "YES"
	if noPassword {
		usingPw = "NO"
	}
	l.srv.audit.Info("login failed", zap.String("user", l.user), zap.String("client", host),
		zap.Bool("known_user", known), zap.String("using_password", usingPw), zap.String("reason", loginReason(reason)))
	e := reason
	if errors.Is(reason, errNoAccount) || errors.Is(reason, errWrongPassword) {
		e = errorf(errAccessDenied, "Access denied for user '%s'@'%s' (using password: %s)", l.user, host, usingPw)
	}
	_ = l.refuse(seq, e)
	return e
}

// loginReason names why a login was refused, for the audit log.
func loginReason(err error) string {
	switch {
	case errors.Is(err, errNoAccount):
		return "no such account"
	case errors.Is(err, errWrongPassword):
		return "wrong password"
	case errors.Is(err, errAmbiguousHost):
		return "account rows ambiguous for the client address"
	case errors.Is(err, errAuthMode):
		return "account plugin not served"
	}
	return "refused"
}

// clientSettings is what the client negotiated at login (and COM_CHANGE_USER
// or COM_SET_OPTION changed since): its capabilities, the scramble's salt,
// MariaDB's extended capabilities, the collation, the connection attributes, the password and
// how its backend connections log in, and the multi-statements option.
type clientSettings struct {
	caps uint32 // the capabilities the client negotiated
	salt []byte
	// ext are the MariaDB extended capabilities the client negotiated
	// (mariadbcaps.go), which its backend connections negotiate too.
	ext       uint32
	collation uint8
	attrs     connAttrs // the client's connection attributes
	password  string
	// relayed: the user's account was read from the primary
	// (users.from_backend), and stage1 = SHA1(password) is what its
	// backend connections log in with (relaylogin.go); never logged.
	relayed bool
	stage1  []byte
	// multiOption is the client's last COM_SET_OPTION that succeeded:
	// 0 none, 1 multi-statements on, 2 off (multiStatements).
	multiOption uint8
}
