package proxy

import (
	"context"
	"crypto/sha1"
	"crypto/subtle"
	"crypto/tls"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/rules"
)

// Accounts read from the primary (users.from_backend).
//
// lockproxy reads the primary's accounts (mysql.global_priv, MariaDB 10.4
// and later) as its own account (the first of users:, which needs SELECT
// on mysql.global_priv), at start, on every reload, when MariaDB refuses
// a login lockproxy let in, and when a login fails — at most once per
// accountsRereadGap but for reloads, so a client guessing passwords or
// user names cannot make lockproxy hammer the primary; a failed login
// waits for the next read and is checked again. A client of such an
// account is switched to
// mysql_native_password; its answer proves SHA1(password) against the
// account's stored hash, and lockproxy then logs in to the backend as the
// account with that proof (relaylogin.go).

// accountsRereadGap is the least time between two reads of the accounts
// that failed logins start: a failed login waits up to that long for the
// next read, which all the failed logins meanwhile share.
const accountsRereadGap = time.Second

// accountsReadTimeout bounds one read of the accounts.
const accountsReadTimeout = 5 * time.Second

// accountRow is one user@host row of the primary's accounts.
type accountRow struct {
	user, host string
	// plugin is the account's authentication plugin; several is set
	// when it has more than one (IDENTIFIED VIA ... OR ...).
	plugin  string
	several bool
	// auth is the plugin's authentication string; for
	// mysql_native_password "*" and the hex of SHA1(SHA1(password)), or
	// "" for no password.
	auth string
	// or is the row's auth_or as stored: the plugins and credentials
	// MariaDB tries before and after the row's own.
	or string
	// passed: lockproxy cannot check the account's answer but relays its
	// login to MariaDB (passLogin): its plugins, every one of them, are
	// ed25519 or mysql_native_password, and it is not one native
	// password.
	passed bool
}

// passedPlugins are the plugins whose logins lockproxy relays packet for
// packet: their client side is in the common drivers, and their
// exchange is the client's answer to the server's request.
var passedPlugins = map[string]bool{"ed25519": true, mysql.AUTH_NATIVE_PASSWORD: true}

// sameCredentials reports whether a login that r accepts is accepted by
// o too.
func (r accountRow) sameCredentials(o accountRow) bool {
	return r.plugin == o.plugin && r.several == o.several && r.auth == o.auth && r.or == o.or && r.passed == o.passed
}

// nativeHash returns the SHA1(SHA1(password)) of a mysql_native_password
// row, nil for one without password, or ok false when r cannot be
// served: another plugin, or several. An authentication string that is
// no hash (a locked-out 'invalid') gives an empty hash no answer matches,
// as in MariaDB.
func (r accountRow) nativeHash() (hash []byte, ok bool) {
	if r.plugin != mysql.AUTH_NATIVE_PASSWORD || r.several {
		return nil, false
	}
	if r.auth == "" {
		return nil, true
	}
	hash, err := hex.DecodeString(strings.TrimPrefix(r.auth, "*"))
	if err != nil || len(r.auth) != 41 || r.auth[0] != '*' {
		return []byte{}, true
	}
	return hash, true
}

// accountBook is lockproxy's copy of the primary's accounts. Safe for
// concurrent use.
type accountBook struct {
	mu sync.Mutex
	// users are the rows by user name; "" holds the anonymous rows.
	users           map[string][]accountRow
	skipNameResolve bool
	// lastStart is when the last read began, and lastErr how it ended;
	// reading, when not nil, is closed when the read in flight ends.
	lastStart time.Time
	lastErr   error
	reading   chan struct{}
	gap       time.Duration // accountsRereadGap; tests shorten it
	// reads counts reads by result (lockproxy_account_reads_total).
	reads func(result string)
}

func newAccountBook(reads func(string)) *accountBook {
	return &accountBook{gap: accountsRereadGap, reads: reads}
}

// Reasons a login of an account read from the primary is refused.
var (
	errNoAccount     = errors.New("no account of that name matches the client's address")
	errWrongPassword = errors.New("wrong password")
	errAmbiguousHost = errors.New("the account's rows that may match the client's address differ in credentials, or are anonymous")
)

// verify checks a mysql_native_password answer to salt by user from the
// client address ip and returns stage1 = SHA1(password) (nil for an
// account without password). Its error wraps errAccessDenied (with
// errNoAccount, errWrongPassword or errAmbiguousHost) or errAuthMode,
// with words for the client.
func (b *accountBook) verify(user, ip string, salt, answer []byte) ([]byte, error) {
	b.mu.Lock()
	named, anon, skip := b.users[user], b.users[""], b.skipNameResolve
	b.mu.Unlock()
	row, found, ambiguous := pickRow(named, anon, peerAt(ip, skip))
	switch {
	case !found:
		return nil, fmt.Errorf("%w: %w", errAccessDenied, errNoAccount)
	case ambiguous:
		return nil, errorf(errAccessDenied, "Access denied for user '%s'@'%s': %w; lockproxy cannot tell which MariaDB would use (users.from_backend)",
			user, ip, errAmbiguousHost)
	}
	hash, ok := row.nativeHash()
	if !ok {
		plugin := row.plugin
		if row.several {
			plugin = "several plugins"
		}
		return nil, errorf(errAuthMode, "account '%s'@'%s' logs in with %s; lockproxy serves only mysql_native_password accounts from the primary (list the user under users: instead)",
			user, row.host, plugin)
	}
	if hash == nil {
		if len(answer) == 0 || (len(answer) == 1 && answer[0] == 0) {
			return nil, nil
		}
		return nil, fmt.Errorf("%w: %w", errAccessDenied, errWrongPassword)
	}
	if len(hash) != sha1.Size || len(answer) != sha1.Size || len(salt) < 20 {
		return nil, fmt.Errorf("%w: %w", errAccessDenied, errWrongPassword)
	}
	h := sha1.New()
	h.Write(salt[:20])
	h.Write(hash)
	stage1 := h.Sum(nil)
	for i := range stage1 {
		stage1[i] ^= answer[i]
	}
	if got := sha1.Sum(stage1); subtle.ConstantTimeCompare(got[:], hash) != 1 {
		clear(stage1)
		return nil, fmt.Errorf("%w: %w", errAccessDenied, errWrongPassword)
	}
	return stage1, nil
}

// passes reports whether the account user logs in as from the client
// address ip is one whose login lockproxy relays (accountRow.passed).
func (b *accountBook) passes(user, ip string) bool {
	b.mu.Lock()
	named, anon, skip := b.users[user], b.users[""], b.skipNameResolve
	b.mu.Unlock()
	row, found, ambiguous := pickRow(named, anon, peerAt(ip, skip))
	return found && !ambiguous && row.passed
}

// matchedAlike checks a passed login, which MariaDB judged against the
// row it matched for lockproxy's own address, current (CURRENT_USER() of
// the connection: user@host): that row must have the credentials of the
// row lockproxy picks for user from the client address ip, or a client
// would log in with another host's password. Its error wraps
// errAccessDenied.
func (b *accountBook) matchedAlike(user, ip, current string) error {
	at := strings.LastIndexByte(current, '@')
	if at < 0 {
		return errorf(errAccessDenied, "Access denied for user '%s'@'%s': MariaDB matched %q, not an account row", user, ip, current)
	}
	cu, ch := current[:at], current[at+1:]
	b.mu.Lock()
	named, anon, skip := b.users[user], b.users[""], b.skipNameResolve
	rows := b.users[cu]
	b.mu.Unlock()
	row, found, ambiguous := pickRow(named, anon, peerAt(ip, skip))
	for _, r := range rows {
		if found && !ambiguous && r.host == ch && r.sameCredentials(row) {
			return nil
		}
	}
	return errorf(errAccessDenied, "Access denied for user '%s'@'%s': MariaDB matched lockproxy's login to '%s'@'%s', whose credentials differ from those of '%s'@'%s' (give the account the same credentials on every host)",
		user, ip, cu, ch, user, row.host)
}

// read makes sure the accounts in force were read from cfg's primary
// after it was called: it waits for a read that began since, or starts
// one. Unless force, a read begins at least gap after the one before, so
// a caller may wait up to gap (the failed logins of one second share one
// read). It reports whether such a read ended; a failed read keeps the
// accounts read before and returns its error.
func (b *accountBook) read(ctx context.Context, cfg *rules.Config, btls *tls.Config, force bool) (bool, error) {
	asked := time.Now()
	for {
		b.mu.Lock()
		wait, began, err := b.reading, b.lastStart, b.lastErr
		var pause time.Duration
		if !force {
			pause = b.gap - time.Since(began)
		}
		switch {
		case wait != nil:
		case !began.Before(asked):
			b.mu.Unlock()
			return true, err // one began since, and has ended
		case pause <= 0:
			return true, b.readLocked(ctx, cfg, btls) // unlocks
		}
		b.mu.Unlock()
		if !b.await(ctx, wait, pause) {
			return false, ctx.Err()
		}
	}
}

// await waits for wait to close, or, when it is nil, for pause to pass;
// false when ctx ends first.
func (b *accountBook) await(ctx context.Context, wait chan struct{}, pause time.Duration) bool {
	if wait == nil {
		t := time.NewTimer(pause)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
	select {
	case <-wait:
		return true
	case <-ctx.Done():
		return false
	}
}

// readLocked reads the accounts. b.mu is held on entry and released
// while the primary is asked; it is released on return.
func (b *accountBook) readLocked(ctx context.Context, cfg *rules.Config, btls *tls.Config) error {
	done := make(chan struct{})
	b.reading, b.lastStart = done, time.Now()
	b.mu.Unlock()
	users, skip, err := readAccounts(ctx, cfg, btls)
	b.mu.Lock()
	defer b.mu.Unlock()
	defer close(done)
	b.reading, b.lastErr = nil, err
	if err != nil {
		b.reads("failure")
		return err
	}
	b.reads("success")
	b.users, b.skipNameResolve = users, skip
	return nil
}

// readAccounts reads the accounts of cfg's primary as its first user.
func readAccounts(ctx context.Context, cfg *rules.Config, btls *tls.Config) (map[string][]accountRow, bool, error) {
	connector, err := primaryConnector(cfg, btls)
	if err != nil {
		return nil, false, err
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, accountsReadTimeout)
	defer cancel()
	var skip bool
	if err := db.QueryRowContext(ctx, "SELECT @@skip_name_resolve").Scan(&skip); err != nil {
		return nil, false, fmt.Errorf("proxy: reading skip_name_resolve: %w", err)
	}
	rows, err := db.QueryContext(ctx, "SELECT User, Host, Priv FROM mysql.global_priv")
	if err != nil {
		return nil, false, fmt.Errorf("proxy: reading the accounts (the first of users: needs SELECT on mysql.global_priv): %w", err)
	}
	defer rows.Close()
	users := map[string][]accountRow{}
	for rows.Next() {
		var user, host string
		var priv []byte
		if err := rows.Scan(&user, &host, &priv); err != nil {
			return nil, false, fmt.Errorf("proxy: reading the accounts: %w", err)
		}
		row, isRole, err := parsePriv(user, host, priv)
		if err != nil {
			return nil, false, fmt.Errorf("proxy: reading the account '%s'@'%s': %w", user, host, err)
		}
		if !isRole {
			users[user] = append(users[user], row)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("proxy: reading the accounts: %w", err)
	}
	return users, skip, nil
}

// parsePriv reads the JSON of a mysql.global_priv row.
func parsePriv(user, host string, priv []byte) (accountRow, bool, error) {
	type method struct {
		Plugin string `json:"plugin"`
	}
	var p struct {
		Plugin string          `json:"plugin"`
		Auth   string          `json:"authentication_string"`
		AuthOr json.RawMessage `json:"auth_or"`
		IsRole bool            `json:"is_role"`
	}
	if err := json.Unmarshal(priv, &p); err != nil {
		return accountRow{}, false, err
	}
	var chain []method
	if len(p.AuthOr) > 0 {
		if err := json.Unmarshal(p.AuthOr, &chain); err != nil {
			return accountRow{}, false, err
		}
	}
	plugin := strings.TrimSpace(p.Plugin)
	if plugin == "" {
		plugin = mysql.AUTH_NATIVE_PASSWORD // an old row: the default plugin
	}
	row := accountRow{user: user, host: host, plugin: plugin, several: len(chain) > 1, auth: p.Auth, or: string(p.AuthOr)}
	// auth_or lists the plugins MariaDB tries in order, the row's own
	// (plugin, authentication_string) standing as an empty entry.
	row.passed = passedPlugins[plugin]
	for _, m := range chain {
		if m.Plugin != "" && !passedPlugins[strings.TrimSpace(m.Plugin)] {
			row.passed = false
		}
	}
	if plugin == mysql.AUTH_NATIVE_PASSWORD && !row.several {
		row.passed = false // lockproxy checks it itself
	}
	return row, p.IsRole, nil
}
