package proxy

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
)

func TestWildMatch(t *testing.T) {
	for _, c := range []struct {
		s, p string
		fold bool
		want bool
	}{
		{"10.0.0.5", "%", false, true},
		{"10.0.0.5", "10.0.0.%", false, true},
		{"10.0.0.5", "10.0.0._", false, true},
		{"10.0.0.55", "10.0.0._", false, false},
		{"10.0.0.5", "10.0.%.5", false, true},
		{"10.0.1.5", "10.0.0.%", false, false},
		{"10.0.0.5", "%.5", false, true},
		{"10.0.0.5", "10.0.0.5", false, true},
		{"10.0.0.5", "10.0.0.50", false, false},
		{"a_b", `a\_b`, false, true},
		{"axb", `a\_b`, false, false},
		{"a%b", `a\%b`, false, true},
		{"axxb", `a\%b`, false, false},
		{"LocalHost", "localhost", true, true},
		{"localhost", "LOCAL%", true, true},
		{"fe80::1", "FE80::1", false, false}, // addresses compare exactly
		{"", "%", false, true},
		{"", "_", false, false},
		{"abc", "%%%c", false, true},
		{strings.Repeat("a", 200), strings.Repeat("%a", 60) + "b", false, false}, // no exponential backtracking
	} {
		if got := wildMatch(c.s, c.p, c.fold); got != c.want {
			t.Errorf("wildMatch(%q, %q, %v) = %v, want %v", c.s, c.p, c.fold, got, c.want)
		}
	}
}

func TestHostMatch(t *testing.T) {
	resolving := func(ip string) peer { return peerAt(ip, false) }
	skipping := func(ip string) peer { return peerAt(ip, true) }
	for _, c := range []struct {
		who  peer
		host string
		want hostMatch
	}{
		{resolving("10.1.2.3"), "%", hostYes},
		{resolving("10.1.2.3"), "", hostYes}, // '' is '%'
		{resolving("10.1.2.3"), "10.1.2.3", hostYes},
		{resolving("10.1.2.3"), "10.1.%", hostYes},
		{resolving("10.1.2.3"), "10.2.%", hostNo}, // an IPv4-like pattern names no host
		{resolving("10.1.2.3"), "10.0.0.0/255.0.0.0", hostYes},
		{resolving("11.1.2.3"), "10.0.0.0/255.0.0.0", hostNo},
		{resolving("10.1.2.3"), "10.0.0.0/0.0.0.0", hostNo}, // a zero mask is no mask
		{resolving("10.1.2.3"), "app1.example.com", hostMaybe},
		{resolving("10.1.2.3"), "%.example.com", hostMaybe},
		{resolving("10.1.2.3"), "localhost", hostMaybe},
		{skipping("10.1.2.3"), "app1.example.com", hostNo},
		{skipping("10.1.2.3"), "localhost", hostNo},
		{resolving("127.0.0.1"), "localhost", hostYes},
		{resolving("127.0.0.1"), "app1.example.com", hostNo}, // a loopback client's name is known
		{skipping("127.0.0.1"), "localhost", hostNo},
		{resolving("::1"), "localhost", hostYes},
		{resolving("::1"), "::1", hostYes},
		{resolving("::ffff:10.1.2.3"), "10.1.2.3", hostYes},
		{resolving("fe80::1"), "fe80::%", hostYes},
	} {
		if got := c.who.match(c.host); got != c.want {
			t.Errorf("%+v match %q = %v, want %v", c.who, c.host, got, c.want)
		}
	}
}

func TestPickRow(t *testing.T) {
	row := func(user, host, auth string) accountRow {
		return accountRow{user: user, host: host, plugin: mysql.AUTH_NATIVE_PASSWORD, auth: auth}
	}
	for _, c := range []struct {
		name             string
		named, anon      []accountRow
		ip               string
		skip             bool
		want             string // host of the row picked; "" none
		found, wantAmbig bool
	}{
		{name: "one wildcard row", named: []accountRow{row("u", "%", "*A")}, ip: "10.0.0.5", want: "%", found: true},
		{name: "no row matches", named: []accountRow{row("u", "10.9.%", "*A")}, ip: "10.0.0.5"},
		{name: "exact address wins over a pattern with another password",
			named: []accountRow{row("u", "%", "*A"), row("u", "10.0.0.5", "*B")}, ip: "10.0.0.5", want: "10.0.0.5", found: true},
		{name: "two patterns with one password",
			named: []accountRow{row("u", "10.0.%", "*A"), row("u", "%", "*A")}, ip: "10.0.0.5", want: "10.0.%", found: true},
		{name: "two patterns with two passwords",
			named: []accountRow{row("u", "10.0.%", "*A"), row("u", "%", "*B")}, ip: "10.0.0.5", found: true, wantAmbig: true},
		{name: "a host name may match, another password",
			named: []accountRow{row("u", "%.example.com", "*B"), row("u", "%", "*A")}, ip: "10.0.0.5", found: true, wantAmbig: true},
		{name: "a host name may tie with the exact address",
			named: []accountRow{row("u", "app1.example.com", "*B"), row("u", "10.0.0.5", "*A")}, ip: "10.0.0.5", found: true, wantAmbig: true},
		{name: "host names do not match under skip_name_resolve",
			named: []accountRow{row("u", "%.example.com", "*B"), row("u", "%", "*A")}, ip: "10.0.0.5", skip: true, want: "%", found: true},
		{name: "an anonymous row may come first",
			named: []accountRow{row("u", "%", "*A")}, anon: []accountRow{row("", "10.0.0.5", "")}, ip: "10.0.0.5", found: true, wantAmbig: true},
		{name: "the exact named row comes before an anonymous one",
			named: []accountRow{row("u", "10.0.0.5", "*A")}, anon: []accountRow{row("", "10.0.0.5", "")}, ip: "10.0.0.5", want: "10.0.0.5", found: true},
		{name: "an anonymous row alone is not served",
			anon: []accountRow{row("", "%", "")}, ip: "10.0.0.5", found: true, wantAmbig: true},
		{name: "localhost before 127.0.0.1",
			named: []accountRow{row("u", "127.0.0.1", "*A"), row("u", "localhost", "*B")}, ip: "127.0.0.1", want: "localhost", found: true},
		{name: "127.0.0.1 alone under skip_name_resolve",
			named: []accountRow{row("u", "127.0.0.1", "*A"), row("u", "localhost", "*B")}, ip: "127.0.0.1", skip: true, want: "127.0.0.1", found: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, found, ambiguous := pickRow(c.named, c.anon, peerAt(c.ip, c.skip))
			if found != c.found || ambiguous != c.wantAmbig || (found && !ambiguous && got.host != c.want) {
				t.Errorf("got %q found %v ambiguous %v, want %q found %v ambiguous %v", got.host, found, ambiguous, c.want, c.found, c.wantAmbig)
			}
		})
	}
}

// storedHash is the authentication string MariaDB stores for password.
func storedHash(password string) string {
	s1 := sha1.Sum([]byte(password))
	s2 := sha1.Sum(s1[:])
	return "*" + strings.ToUpper(hex.EncodeToString(s2[:]))
}

// TestVerifyAndRelay: the answer a client computes from its password
// proves SHA1(password), which answers any other scramble exactly as the
// password would.
func TestVerifyAndRelay(t *testing.T) {
	book := newAccountBook(func(string) {})
	book.users = map[string][]accountRow{
		"app":    {{user: "app", host: "%", plugin: mysql.AUTH_NATIVE_PASSWORD, auth: storedHash("s3cret")}},
		"nopw":   {{user: "nopw", host: "%", plugin: mysql.AUTH_NATIVE_PASSWORD}},
		"sock":   {{user: "sock", host: "%", plugin: "unix_socket"}},
		"either": {{user: "either", host: "%", plugin: mysql.AUTH_NATIVE_PASSWORD, several: true, auth: storedHash("x")}},
		"bad":    {{user: "bad", host: "%", plugin: mysql.AUTH_NATIVE_PASSWORD, auth: "invalid"}},
	}
	salt, err := newSalt()
	if err != nil {
		t.Fatal(err)
	}
	stage1, err := book.verify("app", "10.0.0.5", salt, mysql.CalcNativePassword(salt, []byte("s3cret")))
	if err != nil {
		t.Fatalf("right password: %v", err)
	}
	if want := sha1.Sum([]byte("s3cret")); !bytes.Equal(stage1, want[:]) {
		t.Fatal("the recovered stage1 is not SHA1(password)")
	}
	other, _ := newSalt()
	if got, want := nativeAnswer(other, string(stage1)), mysql.CalcNativePassword(other, []byte("s3cret")); !bytes.Equal(got, want) {
		t.Fatal("the relayed answer differs from the password's own")
	}
	for _, c := range []struct {
		user, password string
		want           error
	}{
		{"app", "wrong", errWrongPassword},
		{"app", "", errWrongPassword},
		{"nobody", "s3cret", errNoAccount},
		{"nopw", "x", errWrongPassword},
		{"sock", "x", errAuthMode},
		{"either", "x", errAuthMode},
		{"bad", "x", errWrongPassword},
		{"bad", "", errWrongPassword},
	} {
		_, err := book.verify(c.user, "10.0.0.5", salt, mysql.CalcNativePassword(salt, []byte(c.password)))
		if !errors.Is(err, c.want) {
			t.Errorf("%s with %q: %v, want %v", c.user, c.password, err, c.want)
		}
	}
	if s, err := book.verify("nopw", "10.0.0.5", salt, nil); err != nil || s != nil {
		t.Errorf("an account without password and an empty answer: %v, %v", s, err)
	}
	if a := nativeAnswer(other, ""); len(a) != 0 {
		t.Errorf("an account without password is answered with %x", a)
	}
}

func TestParsePriv(t *testing.T) {
	for _, c := range []struct {
		json           string
		want           accountRow
		role, wantFail bool
	}{
		{json: `{"access":0,"plugin":"mysql_native_password","authentication_string":"*2B60"}`,
			want: accountRow{user: "u", host: "h", plugin: "mysql_native_password", auth: "*2B60"}},
		{json: `{"plugin":"mysql_native_password","authentication_string":"*66","auth_or":[{},{"plugin":"unix_socket"}]}`,
			want: accountRow{user: "u", host: "h", plugin: "mysql_native_password", auth: "*66", several: true, or: `[{},{"plugin":"unix_socket"}]`}},
		// Logins lockproxy relays to MariaDB: ed25519, alone or with
		// mysql_native_password.
		{json: `{"plugin":"ed25519","authentication_string":"9IaQu55Q"}`,
			want: accountRow{user: "u", host: "h", plugin: "ed25519", auth: "9IaQu55Q", passed: true}},
		{json: `{"plugin":"mysql_native_password","authentication_string":"*B2","auth_or":[{"plugin":"ed25519","authentication_string":"9I"},{}]}`,
			want: accountRow{user: "u", host: "h", plugin: "mysql_native_password", auth: "*B2", several: true, passed: true,
				or: `[{"plugin":"ed25519","authentication_string":"9I"},{}]`}},
		{json: `{"plugin":"ed25519","authentication_string":"9I","auth_or":[{},{"plugin":"pam"}]}`,
			want: accountRow{user: "u", host: "h", plugin: "ed25519", auth: "9I", several: true, or: `[{},{"plugin":"pam"}]`}},
		{json: `{"access":0}`, want: accountRow{user: "u", host: "h", plugin: "mysql_native_password"}},
		{json: `{"access":0,"is_role":true}`, want: accountRow{user: "u", host: "h", plugin: "mysql_native_password"}, role: true},
		{json: `not json`, wantFail: true},
	} {
		got, role, err := parsePriv("u", "h", []byte(c.json))
		if (err != nil) != c.wantFail || (err == nil && (got != c.want || role != c.role)) {
			t.Errorf("%s: got %+v role %v err %v, want %+v role %v", c.json, got, role, err, c.want, c.role)
		}
	}
}

func TestGreetingScramble(t *testing.T) {
	salt, err := newSalt()
	if err != nil {
		t.Fatal(err)
	}
	p := initialHandshake("10.11.0-MariaDB", 7, salt, serverCaps, 0, mysql.AUTH_NATIVE_PASSWORD)
	if got := greetingScramble(p); !bytes.Equal(got, salt) {
		t.Fatalf("scramble %q, want %q", got, salt)
	}
	for _, bad := range [][]byte{nil, {9}, p[:20], {10, 'x'}} {
		if got := greetingScramble(bad); len(got) != 0 {
			t.Errorf("%q: scramble %q, want none", bad, got)
		}
	}
}

func FuzzGreetingScramble(f *testing.F) {
	salt, _ := newSalt()
	f.Add(initialHandshake("10.11.0-MariaDB", 7, salt, serverCaps, 0, mysql.AUTH_NATIVE_PASSWORD))
	f.Add([]byte{10, 0})
	f.Fuzz(func(t *testing.T, p []byte) {
		if got := greetingScramble(p); len(got) != 0 && len(got) != 20 {
			t.Fatalf("scramble of %d bytes", len(got))
		}
	})
}
