package router

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ErrBadGTID is wrapped by every GTID or GTID position that does not parse.
var ErrBadGTID = errors.New("router: bad GTID")

// GTID is one MariaDB global transaction ID, domain-server-sequence, as in
// "0-1-42".
type GTID struct {
	Domain uint32
	Server uint32
	Seq    uint64
}

// String formats g as MariaDB does: "domain-server-seq".
func (g GTID) String() string {
	return strconv.FormatUint(uint64(g.Domain), 10) + "-" +
		strconv.FormatUint(uint64(g.Server), 10) + "-" +
		strconv.FormatUint(g.Seq, 10)
}

// GTIDPos is a MariaDB GTID position: at most one GTID per replication
// domain, as in @@gtid_slave_pos "0-1-42,1-2-7". The empty position is valid
// (nothing replicated).
type GTIDPos []GTID

// String formats p as MariaDB does, domains ascending, comma separated.
func (p GTIDPos) String() string {
	parts := make([]string, len(p))
	for i, g := range p {
		parts[i] = g.String()
	}
	return strings.Join(parts, ",")
}

// Reached reports whether p has applied want: for every domain of want, p
// has that domain with a sequence number at least as high. Server IDs are
// not compared (within a domain, sequence numbers order transactions).
func (p GTIDPos) Reached(want GTIDPos) bool {
	for _, w := range want {
		got, ok := p.domain(w.Domain)
		if !ok || got.Seq < w.Seq {
			return false
		}
	}
	return true
}

// Merge returns the position that has applied both p and q: for every
// domain of either, the GTID with the higher sequence number. Neither p
// nor q is changed; the result is sorted by domain.
func (p GTIDPos) Merge(q GTIDPos) GTIDPos {
	out := append(GTIDPos(nil), p...)
	for _, g := range q {
		i := slices.IndexFunc(out, func(o GTID) bool { return o.Domain == g.Domain })
		switch {
		case i < 0:
			out = append(out, g)
		case out[i].Seq < g.Seq:
			out[i] = g
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Domain < out[j].Domain })
	return out
}

func (p GTIDPos) domain(d uint32) (GTID, bool) {
	for _, g := range p {
		if g.Domain == d {
			return g, true
		}
	}
	return GTID{}, false
}

// ParseGTIDPos parses a MariaDB GTID position strictly: GTIDs of three
// decimal numbers joined by '-', separated by ','. Blanks around a GTID
// are allowed (SHOW SLAVE STATUS may print ", "); nothing else is: no
// signs, no empty elements, no duplicate domain, no number out of range.
// The result is sorted by domain.
func ParseGTIDPos(s string) (GTIDPos, error) {
	if strings.TrimSpace(s) == "" {
		return GTIDPos{}, nil
	}
	parts := strings.Split(s, ",")
	pos := make(GTIDPos, 0, len(parts))
	seen := make(map[uint32]bool, len(parts))
	for _, part := range parts {
		g, err := ParseGTID(strings.Trim(part, " \t\r\n"))
		if err != nil {
			return nil, err
		}
		if seen[g.Domain] {
			return nil, fmt.Errorf("%w: domain %d twice in %q", ErrBadGTID, g.Domain, s)
		}
		seen[g.Domain] = true
		pos = append(pos, g)
	}
	sort.Slice(pos, func(i, j int) bool { return pos[i].Domain < pos[j].Domain })
	return pos, nil
}

// ParseGTID parses one GTID "domain-server-seq": decimal digits only.
func ParseGTID(s string) (GTID, error) {
	f := strings.Split(s, "-")
	if len(f) != 3 {
		return GTID{}, fmt.Errorf("%w: %q is not domain-server-sequence", ErrBadGTID, s)
	}
	var n [3]uint64
	for i, bits := range [3]int{32, 32, 64} {
		if !allDigits(f[i]) {
			return GTID{}, fmt.Errorf("%w: %q: %q is not a decimal number", ErrBadGTID, s, f[i])
		}
		v, err := strconv.ParseUint(f[i], 10, bits)
		if err != nil {
			return GTID{}, fmt.Errorf("%w: %q: %q out of range", ErrBadGTID, s, f[i])
		}
		n[i] = v
	}
	return GTID{Domain: uint32(n[0]), Server: uint32(n[1]), Seq: n[2]}, nil
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// GTIDReached reports whether the position pos (a replica's
// @@gtid_slave_pos) includes want (a GTID or position the session wrote on
// the primary), comparing sequence numbers per domain. An empty want is
// always reached. If either does not parse the answer is false, so the
// caller reads from the primary rather than from a replica that may be
// behind.
func GTIDReached(pos, want string) bool {
	w, err := ParseGTIDPos(want)
	if err != nil {
		return false
	}
	p, err := ParseGTIDPos(pos)
	if err != nil {
		return false
	}
	return p.Reached(w)
}

// WaitGTIDQuery returns "SELECT MASTER_GTID_WAIT('<gtid>', <seconds>)" for a
// replica: it answers 0 once the replica has applied gtid (a GTID or a
// position), -1 when timeout passed first, NULL on error. The GTID is
// validated with ParseGTIDPos and re-formatted from the parsed numbers, so
// no caller text reaches the SQL; when it does not parse, or is empty, the
// result is "" and must not be sent. A negative timeout is taken as 0 (never
// "wait forever").
func WaitGTIDQuery(gtid string, timeout time.Duration) string {
	pos, err := ParseGTIDPos(gtid)
	if err != nil || len(pos) == 0 {
		return ""
	}
	secs := max(timeout, 0).Seconds()
	return "SELECT MASTER_GTID_WAIT('" + pos.String() + "', " +
		strconv.FormatFloat(secs, 'f', -1, 64) + ")"
}
