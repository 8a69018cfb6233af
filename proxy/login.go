package proxy

import (
	"context"
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
//
// An account read from the primary whose plugins lockproxy cannot check
// (ed25519) has its login relayed to MariaDB instead (passLogin), into
// database db with collation id collation: the connection it opens
// becomes the session's (s.passed).
func (s *session) authenticate(seq byte, plugin string, auth []byte, want, db string, collation uint8) (byte, error) {
	l := login{srv: s.srv, cr: s.cr, cw: s.cw, tls: s.tls, salt: s.client.salt, user: s.user, refuse: s.writeErrAt}
	l.host, _, _ = net.SplitHostPort(s.conn.RemoteAddr().String())
	l.pass = func(seq byte) (byte, error, error) { return s.passLogin(seq, db, collation) }
	seq, err := l.run(seq, plugin, auth, want)
	if err != nil {
		return 0, err
	}
	s.client.password, s.client.stage1, s.client.relayed = l.password, l.stage1, l.relayed
	s.client.passed = l.passed
	return seq, nil
}

// passLogin opens the session's primary connection as its account (an
// account read from the primary that lockproxy cannot check itself) by
// relaying MariaDB's authentication requests to the client and its
// answers back, packet for packet, from sequence id seq on: MariaDB
// alone judges the login. It returns the next sequence id; refused is
// MariaDB's refusal, or why the connection could not be opened, and err
// a failure of the client's connection.
func (s *session) passLogin(seq byte, db string, collation uint8) (next byte, refused, err error) {
	key := s.client.backendKey(s.srv, s.user, db)
	if collation != 0 {
		key.collation = collation
	}
	cfg := s.srv.config()
	key.password = ""
	key.relay = relayedLogin{on: true, passed: true, viaUser: cfg.Users[0].User, viaPassword: cfg.Users[0].Password}
	var clientErr error
	converse := func(p []byte) ([]byte, error) {
		if _, err := s.cw.writePacket(seq, p); err != nil {
			clientErr = err
			return nil, err
		}
		if err := s.cw.flush(); err != nil {
			clientErr = err
			return nil, err
		}
		rs, answer, err := s.cr.readLogical(4096)
		if err != nil {
			clientErr = err
			return nil, err
		}
		seq = rs + 1
		return answer, nil
	}
	ctx, cancel := context.WithTimeout(s.hardCtx, 2*dialTimeout)
	defer cancel()
	be, err := s.srv.pool.dialPassed(ctx, key, converse)
	switch {
	case clientErr != nil:
		return 0, nil, clientErr
	case err != nil:
		return seq, err, nil
	}
	// MariaDB judged the row it matched for lockproxy's address: it is
	// asked which, and that row must be the one the client's address
	// picks, credentials and all.
	row, qerr := be.queryRow("SELECT CURRENT_USER()")
	if qerr == nil && len(row) != 1 {
		qerr = errNoRow
	}
	if qerr == nil {
		ip, _, _ := net.SplitHostPort(s.conn.RemoteAddr().String())
		qerr = s.srv.accounts.matchedAlike(s.user, ip, string(row[0]))
	}
	if qerr != nil {
		s.srv.pool.put(be) // closed: a passed login is no one else's
		return seq, qerr, nil
	}
	s.passed = be
	return seq, nil, nil
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
	// pass, when set, relays the login of an account lockproxy cannot
	// check to MariaDB (session.passLogin).
	pass func(seq byte) (next byte, refused, err error)
	// What the login proved: the listed user's password, or the
	// stage1 of an account read from the primary (relayed).
	password string
	stage1   []byte
	relayed  bool
	passed   bool // MariaDB judged the login: relayed packet for packet
	// throttled: proxy.login_throttle counts this attempt.
	throttled bool
}

// run checks the client's answer to the greeting, auth in plugin, when
// lockproxy announced want.
func (l *login) run(seq byte, plugin string, auth []byte, want string) (byte, error) {
	named := plugin != "" // a client without CLIENT_PLUGIN_AUTH cannot be switched
	if !named {
		plugin = mysql.AUTH_NATIVE_PASSWORD
	}
	host := l.host
	l.throttled = l.srv.config().Proxy.LoginThrottle
	turn, admitted := loginTurn{}, true
	if l.throttled {
		turn, admitted = l.srv.logins.admit(l.user, host)
	}
	if !admitted {
		l.srv.metrics.loginsThrottled.Inc()
		l.srv.audit.Debug("login refused: too many recent failed logins", zap.String("user", l.user), zap.String("client", host))
		e := errorf(errHostBlocked, "Host '%s' is blocked because of many failed logins; try again later", host)
		_ = l.refuse(seq, e)
		return 0, e
	}
	defer l.srv.logins.release(turn)
	u, known, relayed := l.srv.lookupUser(l.user)
	if relayed && l.pass != nil && l.srv.accounts.passes(l.user, host) {
		return l.relayPassed(seq, named, host, turn)
	}
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
	if l.throttled {
		l.srv.logins.succeeded(l.user, host, turn)
	}
	if plugin == mysql.AUTH_CACHING_SHA2_PASSWORD && fast {
		if _, err := l.cw.writePacket(seq, []byte{authMoreData, mysql.CACHE_SHA2_FAST_AUTH}); err != nil {
			return 0, err
		}
		seq++
	}
	return seq, nil
}

// relayPassed relays the login of an account lockproxy cannot check to
// MariaDB (login.pass), which judges it: its refusal counts as a failed
// login; a client that cannot switch plugins is refused.
func (l *login) relayPassed(seq byte, named bool, host string, turn loginTurn) (byte, error) {
	if !named {
		return 0, l.failed(seq, host, turn, true, false, errorf(errAuthMode,
			"account '%s' logs in with a plugin lockproxy relays to MariaDB, which this client cannot be asked for (it does not announce CLIENT_PLUGIN_AUTH)", l.user))
	}
	next, refused, err := l.pass(seq)
	if err != nil {
		return 0, err
	}
	if refused != nil {
		if se, ok := refused.(*sqlError); ok && se.State == "28000" || errors.Is(refused, errAccessDenied) {
			return 0, l.failed(next, host, turn, true, false, refused)
		}
		e := backendDialError(refused)
		_ = l.refuse(next, e)
		return 0, e
	}
	l.relayed, l.passed = true, true
	if l.throttled {
		l.srv.logins.succeeded(l.user, host, turn)
	}
	return next, nil
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
	if l.throttled {
		l.srv.logins.failed(l.user, host, turn)
	}
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
	// passed: the login was relayed packet for packet (passLogin); the
	// session's one primary connection cannot log in again.
	passed bool
	// multiOption is the client's last COM_SET_OPTION that succeeded:
	// 0 none, 1 multi-statements on, 2 off (multiStatements).
	multiOption uint8
}
