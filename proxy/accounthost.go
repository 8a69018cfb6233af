package proxy

import (
	"net"
	"sort"
	"strconv"
	"strings"
)

// Which of an account's rows MariaDB would use for a client.
//
// MariaDB keeps one row per user@host; a login uses the first row, in
// order of host specificity, whose user is the client's (or anonymous)
// and whose host pattern matches the client's address or host name. A
// pattern is a literal, a LIKE-style pattern (% and _, \ escapes), or an
// IPv4 address/netmask; '' means '%'. The name of a loopback client is
// "localhost"; other names come from DNS, which lockproxy does not ask,
// and with skip_name_resolve there are none.
//
// lockproxy matches the client's IP address (as the client reaches
// lockproxy) the same way, and fails closed where it cannot be sure:
// when a row whose pattern could match a host name lockproxy does not
// know, or an anonymous row, or rows whose order it cannot tell, may
// decide the login, the rows that may match must all be named and carry
// the same credentials, or the login is refused.

// hostMatch is whether a host pattern matches a client.
type hostMatch int

const (
	hostNo    hostMatch = iota
	hostYes             // matches for certain
	hostMaybe           // matches if the client's DNS name does
)

// peer is what a host pattern is matched against: the client's
// address and, when known, its name.
type peer struct {
	ip       string
	name     string // "" when it has none or lockproxy does not know it
	nameKnow bool   // name is what MariaDB would use (loopback, skip_name_resolve)
}

// peerAt describes the client at ip for a server with
// skip_name_resolve as given.
func peerAt(ip string, skipNameResolve bool) peer {
	c := peer{ip: ip, nameKnow: skipNameResolve}
	if a := net.ParseIP(ip); a != nil {
		if v4 := a.To4(); v4 != nil {
			c.ip = v4.String()
		}
		if a.IsLoopback() && !skipNameResolve {
			c.name, c.nameKnow = "localhost", true
		}
	}
	return c
}

// match reports whether host pattern p matches c.
func (c peer) match(p string) hostMatch {
	if p == "" {
		p = "%"
	}
	if ip, mask, ok := netmask(p); ok {
		if a, ok := ipv4(c.ip); ok {
			if a&mask == ip {
				return hostYes
			}
			return hostNo
		}
	}
	if wildMatch(c.ip, p, false) {
		return hostYes
	}
	switch {
	case c.nameKnow && c.name != "" && wildMatch(c.name, p, true):
		return hostYes
	case c.nameKnow || !couldNameHost(p):
		return hostNo
	}
	return hostMaybe
}

// couldNameHost reports whether pattern p could match a DNS name
// MariaDB would accept: MariaDB takes no name that starts with digits
// and a dot (it would pass for an IPv4 address), and names hold no ':'
// or '/'.
func couldNameHost(p string) bool {
	if strings.ContainsAny(p, ":/") {
		return false
	}
	i := 0
	for i < len(p) && p[i] >= '0' && p[i] <= '9' {
		i++
	}
	return !(i > 0 && i < len(p) && p[i] == '.')
}

// exact reports whether pattern p names one host: no wildcard, no mask.
func exact(p string) bool {
	if p == "" {
		return false
	}
	if _, _, ok := netmask(p); ok {
		return false
	}
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '%', '_':
			return false
		case '\\':
			i++
		}
	}
	return true
}

// netmask reads an IPv4 address/netmask pattern ("10.0.0.0/255.0.0.0")
// as MariaDB does: a zero mask is no mask.
func netmask(p string) (ip, mask uint32, ok bool) {
	a, m, found := strings.Cut(p, "/")
	if !found {
		return 0, 0, false
	}
	ip, ok1 := ipv4(a)
	mask, ok2 := ipv4(m)
	return ip, mask, ok1 && ok2 && mask != 0
}

// ipv4 reads a dotted quad of numbers 0..255.
func ipv4(s string) (uint32, bool) {
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return 0, false
	}
	var v uint32
	for _, part := range parts {
		n, err := strconv.ParseUint(part, 10, 8)
		if err != nil || part == "" || part[0] == '+' {
			return 0, false
		}
		v = v<<8 | uint32(n)
	}
	return v, true
}

// wildMatch matches s against a LIKE-style pattern: % any run, _ any one
// character, \ makes the next character literal; fold: case-insensitive
// (host names), else exact (addresses), as MariaDB compares each. It
// backtracks only to the last %, so it takes O(len(s)*len(p)).
func wildMatch(s, p string, fold bool) bool {
	if fold {
		s, p = strings.ToLower(s), strings.ToLower(p)
	}
	si, pi := 0, 0
	starP, starS := -1, 0
	for si < len(s) {
		if pi < len(p) {
			switch c := p[pi]; c {
			case '%':
				starP, starS = pi, si
				pi++
				continue
			case '_':
				si, pi = si+1, pi+1
				continue
			default:
				lit, width := c, 1
				if c == '\\' && pi+1 < len(p) {
					lit, width = p[pi+1], 2
				}
				if s[si] == lit {
					si, pi = si+1, pi+width
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		starS++
		si, pi = starS, starP+1
	}
	for pi < len(p) && p[pi] == '%' {
		pi++
	}
	return pi == len(p)
}

// pickRow chooses the row of user's rows (named, then anonymous) that
// MariaDB would use for c, or says why it cannot: found is false when no
// row matches; ambiguous when the rows that may decide differ in
// credentials or are anonymous.
func pickRow(named, anon []accountRow, c peer) (row accountRow, found, ambiguous bool) {
	var cands []accountRow
	var exactYes []accountRow
	exactMaybe := false
	for _, set := range [][]accountRow{named, anon} {
		for _, r := range set {
			m := c.match(r.host)
			if m == hostNo {
				continue
			}
			cands = append(cands, r)
			switch {
			case !exact(r.host):
			case m == hostYes && r.user != "":
				exactYes = append(exactYes, r)
			case m == hostMaybe:
				exactMaybe = true
			}
		}
	}
	if len(cands) == 0 {
		return accountRow{}, false, false
	}
	// A named row naming exactly the client's address (or "localhost"
	// for a loopback client) comes before every pattern; between two
	// such, MariaDB takes the greater name ("localhost" before
	// "127.0.0.1"). A host name lockproxy cannot resolve may tie with it.
	if len(exactYes) > 0 && !exactMaybe {
		sort.Slice(exactYes, func(i, j int) bool { return exactYes[i].host > exactYes[j].host })
		return exactYes[0], true, false
	}
	first := cands[0]
	for _, r := range cands {
		if r.user == "" || !r.sameCredentials(first) {
			return accountRow{}, true, true
		}
	}
	return first, true, false
}
