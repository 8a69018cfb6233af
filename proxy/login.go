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
	named := plugin != "" // a client without CLIENT_PLUGIN_AUTH cannot be switched
	if !named {
		plugin = mysql.AUTH_NATIVE_PASSWORD
	}
	host, _, _ := net.SplitHostPort(s.conn.RemoteAddr().String())
	turn, admitted := s.srv.logins.admit(s.user, host)
	if !admitted {
		s.srv.metrics.loginsThrottled.Inc()
		s.srv.audit.Debug("login refused: too many recent failed logins", zap.String("user", s.user), zap.String("client", host))
		e := errorf(errHostBlocked, "Host '%s' is blocked because of many failed logins; try again later", host)
		_ = s.writeErrAt(seq, e)
		return 0, e
	}
	defer s.srv.logins.release(turn)
	u, known, relayed := s.srv.lookupUser(s.user)
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
		if seq, auth, err = s.askAgain(seq, want); err != nil {
			return 0, err
		}
		plugin = want
	}
	var stage1 []byte
	var refused error
	fast := false
	if relayed {
		stage1, refused = s.verifyRelayed(host, auth)
	} else {
		var err error
		if fast, seq, refused, err = s.verifyListed(seq, plugin, auth, u.Password, known); err != nil {
			return 0, err
		}
	}
	if refused != nil {
		return 0, s.loginFailed(seq, host, turn, known || relayed, len(auth) == 0, refused)
	}
	s.client.password, s.client.stage1, s.client.relayed = u.Password, stage1, relayed
	s.srv.logins.succeeded(s.user, host, turn)
	if plugin == mysql.AUTH_CACHING_SHA2_PASSWORD && fast {
		if _, err := s.cw.writePacket(seq, []byte{authMoreData, mysql.CACHE_SHA2_FAST_AUTH}); err != nil {
			return 0, err
		}
		seq++
	}
	return seq, nil
}

// askAgain sends an AuthSwitchRequest for plugin with the session's
// scramble and returns the client's answer and the next sequence id.
func (s *session) askAgain(seq byte, plugin string) (byte, []byte, error) {
	if _, err := s.cw.writePacket(seq, authSwitchRequest(plugin, s.client.salt)); err != nil {
		return 0, nil, err
	}
	if err := s.cw.flush(); err != nil {
		return 0, nil, err
	}
	seq, p, err := s.cr.readLogical(4096)
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
func (s *session) verifyListed(seq byte, plugin string, auth []byte, password string, known bool) (fast bool, next byte, refused, err error) {
	ok := known && checkAuth(plugin, s.client.salt, auth, password)
	fast = ok
	if !ok && plugin == mysql.AUTH_CACHING_SHA2_PASSWORD && len(auth) > 0 && !(len(auth) == 1 && auth[0] == 0) {
		if ok, seq, err = s.fullAuth(seq, known, password); err != nil {
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
func (s *session) verifyRelayed(host string, auth []byte) ([]byte, error) {
	stage1, err := s.srv.accounts.verify(s.user, host, s.client.salt, auth)
	if err == nil {
		return stage1, nil
	}
	if !s.srv.rereadAccounts() {
		return nil, err
	}
	return s.srv.accounts.verify(s.user, host, s.client.salt, auth)
}

// loginFailed counts and logs a refused login and answers it: the
// reason's own words (an account lockproxy cannot serve), or MariaDB's
// access denied.
func (s *session) loginFailed(seq byte, host string, turn loginTurn, known, noPassword bool, reason error) error {
	s.srv.metrics.authFailures.Inc()
	s.srv.logins.failed(s.user, host, turn)
	usingPw := "YES"
	if noPassword {
		usingPw = "NO"
	}
	s.srv.audit.Info("login failed", zap.String("user", s.user), zap.String("client", host),
		zap.Bool("known_user", known), zap.String("using_password", usingPw), zap.String("reason", loginReason(reason)))
	e := reason
	if errors.Is(reason, errNoAccount) || errors.Is(reason, errWrongPassword) {
		e = errorf(errAccessDenied, "Access denied for user '%s'@'%s' (using password: %s)", s.user, host, usingPw)
	}
	_ = s.writeErrAt(seq, e)
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
// or COM_SET_OPTION changed since): the scramble's salt, MariaDB's extended
// capabilities, the collation, the connection attributes, the password and
// how its backend connections log in, and the multi-statements option.
type clientSettings struct {
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
	// 0 none, 1 multi-statements on, 2 off (session.multiStatements).
	multiOption uint8
}
