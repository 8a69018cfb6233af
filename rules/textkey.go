package rules

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	lru "github.com/hashicorp/golang-lru/v2"
)

// Text keys. The lock key of a text value is the value as its column's
// collation weighs it, which only MariaDB knows: lockproxy asks the
// primary for WEIGHT_STRING of the value as the server reads it (from the
// session's client and connection character sets, or an introducer,
// converted to the column's character set), level by level, with the
// trailing space weights a PAD SPACE collation ignores removed. Two values
// MariaDB calls equal then have one key, and two it tells apart have two.
//
// Asking costs a round trip (cached per value), so printable ASCII takes a
// fast path where the server has proven it: when the schema is read, each
// key column's collation is weighed by the server over every printable
// ASCII character and every pair of them (proveASCII). Where pairs weigh
// as their two characters do, an ASCII string's weights are its
// characters' in order and are computed in process. Where each character
// also has one weight unit per level, weights are read back as the string
// of each character's class representative (the greatest byte of the
// characters that weigh alike: 'a' for 'A' and 'a' under a _ci
// collation), so 'ı' and 'i' under utf8mb4_general_ci share the key "i"
// whichever path computed it; other weights are keyed as themselves
// (textKeyMarker, then hex), which no such string can equal.

// TextCharsets are the character sets a statement's text values arrive in,
// as the server reported them for the session.
type TextCharsets struct {
	Client     string // character_set_client; "" is utf8mb4
	Connection string // character_set_connection; "" is Client
}

func (c TextCharsets) client() string {
	if c.Client == "" {
		return "utf8mb4"
	}
	return strings.ToLower(c.Client)
}

func (c TextCharsets) connection() string {
	if c.Connection == "" {
		return c.client()
	}
	return strings.ToLower(c.Connection)
}

// textKeyMarker starts a key made of weights (never a byte of a fast key,
// which is printable ASCII).
const textKeyMarker = "\x00w"

// textCollation is what the primary proved about a key column's collation.
type textCollation struct {
	name, charset string
	pad           bool     // PAD SPACE: trailing spaces do not count
	space         [][]byte // the space's weight at each level (one unit)
	// table holds each printable ASCII byte's weights (c-0x20), level by
	// level; nil when the server did not prove the fast path. fast maps
	// the byte to its class representative, where that is the same key
	// (see proveASCII).
	table  *[95][][]byte
	fast   *[95]byte
	decode map[string]byte // one character's units at every level → its representative
	why    string          // why there is no fast path
	broken string          // why values cannot be keyed at all
	srv    *textServerRef
}

// textServerRef is where a schema's collations find the primary to ask:
// set by Schema.WithTextServer before the schema is used.
type textServerRef struct{ s *TextServer }

func (t *textCollation) levels() int { return len(t.space) }

// asciiOnly reports whether s is printable ASCII (the fast path's domain).
func asciiOnly(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// asciiCharsets are the character sets in which the printable ASCII bytes
// are the ASCII characters, so the fast path may read a value's bytes in
// them (others go to the server whatever the value).
var asciiCharsets = map[string]bool{"utf8mb4": true, "utf8mb3": true, "utf8": true, "latin1": true, "ascii": true}

// fastKey is the key of printable ASCII s under t, when proven.
func (t *textCollation) fastKey(s string) (string, bool) {
	if t.fast == nil {
		if t.table == nil {
			return "", false
		}
		w := make([][]byte, t.levels())
		for i := 0; i < len(s); i++ {
			for l, u := range t.table[s[i]-0x20] {
				w[l] = append(w[l], u...)
			}
		}
		k, err := t.weightsKey(w)
		return k, err == nil
	}
	b := make([]byte, len(s))
	for i := 0; i < len(s); i++ {
		b[i] = t.fast[s[i]-0x20]
	}
	if t.pad {
		for len(b) > 0 && b[len(b)-1] == ' ' {
			b = b[:len(b)-1]
		}
	}
	return string(b), true
}

// weightsKey is the key of a value whose weights (one per level) the
// server gave.
func (t *textCollation) weightsKey(w [][]byte) (string, error) {
	if len(w) != t.levels() {
		return "", fmt.Errorf("%d weight levels for collation %s, which has %d", len(w), t.name, t.levels())
	}
	stripped := make([][]byte, len(w))
	n := -1
	for i, l := range w {
		u := len(t.space[i])
		if u == 0 || len(l)%u != 0 {
			return "", fmt.Errorf("weights of %d bytes at level %d of collation %s, whose units are %d bytes", len(l), i+1, t.name, u)
		}
		if t.pad {
			for len(l) >= u && string(l[len(l)-u:]) == string(t.space[i]) {
				l = l[:len(l)-u]
			}
		}
		stripped[i] = l
		if c := len(l) / u; n == -1 || c == n {
			n = c
		} else {
			n = -2
		}
	}
	if t.decode != nil && n >= 0 {
		b := make([]byte, n)
		unit := make([]byte, 0, 16)
		ok := true
		for k := 0; k < n && ok; k++ {
			unit = unit[:0]
			for i, l := range stripped {
				u := len(t.space[i])
				unit = append(unit, l[k*u:(k+1)*u]...)
			}
			b[k], ok = t.decode[string(unit)]
		}
		if ok {
			return string(b), nil
		}
	}
	var k strings.Builder
	k.WriteString(textKeyMarker)
	for i, l := range stripped {
		if i > 0 {
			k.WriteByte('.')
		}
		k.WriteString(hex.EncodeToString(l))
	}
	return k.String(), nil
}

// nameRE is what a character set or collation name in a query may be.
var nameRE = regexp.MustCompile(`^[a-z0-9_]+$`)

// proveCollation asks the primary what lockproxy keys text under the
// collation name of character set cs by. An error means the collation
// cannot be keyed at all.
func proveCollation(ctx context.Context, db *sql.DB, name, cs string) (*textCollation, error) {
	if !nameRE.MatchString(name) {
		return nil, fmt.Errorf("collation name %q", name)
	}
	if !nameRE.MatchString(cs) {
		return nil, fmt.Errorf("character set name %q", cs)
	}
	t := &textCollation{name: name, charset: cs}
	ascii := func(expr string) string { return "CONVERT(" + expr + " USING " + cs + ") COLLATE " + name }
	probe := ascii("_ascii'Ab '")
	q := "SELECT " + ascii("_ascii'a'") + " = " + ascii("_ascii'a '") + ", HEX(WEIGHT_STRING(" + probe + "))"
	for l := 1; l <= 6; l++ {
		q += ", HEX(WEIGHT_STRING(" + probe + " LEVEL " + strconv.Itoa(l) + "))"
	}
	for l := 1; l <= 6; l++ {
		q += ", HEX(WEIGHT_STRING(" + ascii("_ascii' '") + " LEVEL " + strconv.Itoa(l) + "))"
	}
	vals := make([]string, 14)
	ptrs := make([]any, 14)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := db.QueryRowContext(ctx, q).Scan(ptrs...); err != nil {
		return nil, fmt.Errorf("collation %s: %w", name, err)
	}
	t.pad = vals[0] == "1"
	full, joined := vals[1], ""
	for l := 1; l <= 6; l++ {
		joined += vals[1+l]
		if joined == full {
			for i := 1; i <= l; i++ {
				sp, err := hex.DecodeString(vals[7+i])
				if err != nil || len(sp) == 0 {
					return nil, fmt.Errorf("collation %s: the space has no weight at level %d", name, i)
				}
				t.space = append(t.space, sp)
			}
			break
		}
	}
	if t.levels() == 0 {
		return nil, fmt.Errorf("collation %s: its weights are not its levels' weights one after another", name)
	}
	t.why = t.proveASCII(ctx, db)
	return t, nil
}

// levelList is the WEIGHT_STRING tail that asks for level i (empty when
// the collation has one level: the whole weight string is that level).
func (t *textCollation) levelList(i int) string {
	if t.levels() == 1 {
		return ""
	}
	return " LEVEL " + strconv.Itoa(i+1)
}

// proveASCII weighs every printable ASCII character and every pair of them
// on the server and sets the fast path when they prove it; otherwise it
// returns why not.
//
// Pairs weighing as their two characters one after another at every
// level (no contraction among printable ASCII) set table: a printable
// ASCII string's weights are then its characters' in order, computed in
// process and keyed as the server's are (weightsKey). Where moreover
// every character has one unit per level, decode reads weights back as
// the string of class representatives; and where also no character but
// the space weighs like it at any level, fast maps each byte to its
// representative directly, which is the same key without the weights.
func (t *textCollation) proveASCII(ctx context.Context, db *sql.DB) string {
	if !asciiCharsets[t.charset] && t.charset != "ucs2" && t.charset != "utf16" && t.charset != "utf32" {
		return "character set " + t.charset + " is not proven to hold ASCII as ASCII"
	}
	weigh := func(expr string) string {
		var s strings.Builder
		for i := 0; i < t.levels(); i++ {
			s.WriteString(", HEX(WEIGHT_STRING(CONVERT(" + expr + " USING " + t.charset + ") COLLATE " + t.name + t.levelList(i) + "))")
		}
		return s.String()
	}
	const chars = "WITH RECURSIVE c(n) AS (SELECT 32 UNION ALL SELECT n + 1 FROM c WHERE n < 126) "
	var table [95][][]byte
	got := 0
	rows, err := db.QueryContext(ctx, chars+"SELECT a.n"+weigh("CHAR(a.n USING ascii)")+" FROM c a")
	if err != nil {
		return err.Error()
	}
	for rows.Next() {
		n, w, err := scanWeights(rows, t.levels(), 1)
		if err != nil {
			rows.Close()
			return err.Error()
		}
		table[n[0]-0x20] = w
		got++
	}
	rows.Close()
	if err := rows.Err(); err != nil || got != 95 {
		return fmt.Sprintf("weighed %d of 95 characters: %v", got, err)
	}
	rows, err = db.QueryContext(ctx, chars+"SELECT a.n, b.n"+weigh("CONCAT(CHAR(a.n USING ascii), CHAR(b.n USING ascii))")+" FROM c a, c b")
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	pairs := 0
	for rows.Next() {
		n, w, err := scanWeights(rows, t.levels(), 2)
		if err != nil {
			return err.Error()
		}
		a, b := table[n[0]-0x20], table[n[1]-0x20]
		for i := range w {
			if string(w[i]) != string(a[i])+string(b[i]) {
				return fmt.Sprintf("%q weighs otherwise than its two characters at level %d", string([]byte{byte(n[0]), byte(n[1])}), i+1)
			}
		}
		pairs++
	}
	if err := rows.Err(); err != nil || pairs != 95*95 {
		return fmt.Sprintf("weighed %d of %d pairs: %v", pairs, 95*95, err)
	}
	t.table = &table
	decode := map[string]byte{}
	likeSpace := false
	for c := byte(0x20); c <= 0x7e; c++ {
		w := table[c-0x20]
		for i, l := range w {
			if len(l) != len(t.space[i]) {
				return "" // not one unit per level: weights are keys as they are
			}
			if c != ' ' && string(l) == string(t.space[i]) {
				likeSpace = true
			}
		}
		u := string(joinLevels(w))
		if prev, ok := decode[u]; !ok || c > prev {
			decode[u] = c
		}
	}
	t.decode = decode
	if likeSpace || decode[string(joinLevels(t.space))] != ' ' {
		return ""
	}
	var fast [95]byte
	for c := byte(0x20); c <= 0x7e; c++ {
		fast[c-0x20] = decode[string(joinLevels(table[c-0x20]))]
	}
	t.fast = &fast
	return ""
}

func joinLevels(w [][]byte) []byte {
	var b []byte
	for _, l := range w {
		b = append(b, l...)
	}
	return b
}

// scanWeights reads ints integer columns and then levels hex weights.
func scanWeights(rows *sql.Rows, levels, ints int) ([]int, [][]byte, error) {
	n := make([]int, ints)
	hexes := make([]string, levels)
	ptrs := make([]any, 0, ints+levels)
	for i := range n {
		ptrs = append(ptrs, &n[i])
	}
	for i := range hexes {
		ptrs = append(ptrs, &hexes[i])
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, nil, err
	}
	w := make([][]byte, levels)
	for i, h := range hexes {
		var err error
		if w[i], err = hex.DecodeString(h); err != nil {
			return nil, nil, err
		}
	}
	return n, w, nil
}

// collationProofs caches proofs by server version and collation: a
// collation weighs alike on every server of one version, and the schema is
// read again every backends.schema_refresh.
var collationProofs sync.Map // "version/collation" → *textCollation

// loadCollations proves the collations of the text key columns of s's
// tables, sets each column's, and returns a problem line per collation
// without a fast path (or that cannot be keyed at all).
func loadCollations(ctx context.Context, db *sql.DB, s *Schema) []string {
	var version string
	ref := &textServerRef{}
	s.texts = ref
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		version = "unknown"
	}
	var notes []string
	seen := map[string]*textCollation{}
	for _, t := range s.tables {
		for name, c := range t.Columns {
			// Numeric strings past the in-process digits are converted by
			// the primary too (numkey.go).
			c.srv = ref
			t.Columns[name] = c
			if c.Collation == "" || family(c.DataType) != famString {
				continue
			}
			tc, done := seen[c.charset+"/"+c.Collation]
			if !done {
				key := version + "/" + c.charset + "/" + c.Collation
				if p, ok := collationProofs.Load(key); ok {
					cp := *p.(*textCollation)
					tc = &cp
				} else if p, err := proveCollation(ctx, db, c.Collation, c.charset); err != nil {
					notes = append(notes, fmt.Sprintf("text keys under collation %s cannot be computed, so statements keying them are refused: %v", c.Collation, err))
					tc = &textCollation{name: c.Collation, broken: err.Error()}
				} else {
					collationProofs.Store(key, p)
					cp := *p
					tc = &cp
				}
				tc.srv = ref
				if tc.broken == "" {
					if tc.why != "" {
						notes = append(notes, fmt.Sprintf("collation %s: printable ASCII keys are asked of the server too: %s", c.Collation, tc.why))
					}
				}
				seen[c.charset+"/"+c.Collation] = tc
			}
			c.text = tc
			t.Columns[name] = c
		}
	}
	return notes
}

// TextServer asks the primary for the weights of text key values that the
// fast path does not cover, and caches the answers. Safe for concurrent
// use.
type TextServer struct {
	db      *sql.DB
	cache   *lru.Cache[textQuestion, textAnswer]
	numbers *numberServer // numeric strings past the in-process digits (numkey.go)
	timeout time.Duration
}

// NewTextServer asks through db (a pool of connections to the primary).
func NewTextServer(db *sql.DB) *TextServer {
	c, _ := lru.New[textQuestion, textAnswer](textCacheSize)
	return &TextServer{db: db, cache: c, numbers: newNumberServer(), timeout: textTimeout}
}

const (
	textCacheSize = 65536
	textTimeout   = 2 * time.Second
)

// textQuestion is one value as a statement gives it to a column.
type textQuestion struct {
	collation string
	from, via string // the value's character set, and the connection's it goes through ("" none)
	charCol   bool
	value     string
	cut       int // > 0: the value's first cut characters, as a column of that length stores it
}

// textAnswer is what the server said of a value.
type textAnswer struct {
	key     string
	lossy   bool // not well-formed, or not the same characters in the column's set
	chars   int  // characters as stored (trailing spaces dropped under PAD SPACE)
	octets  int
	failure string // the server refused to weigh it
}

// ask returns the server's answer for q under t.
func (s *TextServer) ask(t *textCollation, q textQuestion) (textAnswer, error) {
	if a, ok := s.cache.Get(q); ok {
		return a, nil
	}
	for _, n := range []string{q.from, q.via} {
		if n != "" && !nameRE.MatchString(n) {
			return textAnswer{}, fmt.Errorf("character set name %q", n)
		}
	}
	h := hex.EncodeToString([]byte(q.value))
	var e0 string
	if q.from == "binary" {
		e0 = "X'" + h + "'"
	} else {
		e0 = "_" + q.from + " X'" + h + "'"
	}
	e1 := e0
	if q.via != "" {
		e1 = "CONVERT(" + e0 + " USING " + q.via + ")"
	}
	converted := "CONVERT(" + e1 + " USING " + t.charset + ")"
	e := converted
	if q.cut > 0 {
		e = "LEFT(" + e + ", " + strconv.Itoa(q.cut) + ")"
	}
	if q.charCol {
		e = "TRIM(TRAILING ' ' FROM " + e + ")"
	}
	back := "CONVERT(" + converted + " USING utf32)"
	switch {
	case q.from == "binary":
		back = "CONVERT(" + back + " USING " + t.charset + ")"
	case q.via != "":
		back = "CONVERT(CONVERT(" + back + " USING " + q.via + ") USING " + q.from + ")"
	default:
		back = "CONVERT(" + back + " USING " + q.from + ")"
	}
	query := "SELECT HEX(CAST(" + back + " AS BINARY)), CHAR_LENGTH(" + e + "), CHAR_LENGTH(TRIM(TRAILING ' ' FROM " + e + ")), OCTET_LENGTH(" + e + ")"
	for i := 0; i < t.levels(); i++ {
		query += ", HEX(WEIGHT_STRING(" + e + " COLLATE " + t.name + t.levelList(i) + "))"
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	vals := make([]sql.NullString, 4+t.levels())
	ptrs := make([]any, len(vals))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := s.db.QueryRowContext(ctx, query).Scan(ptrs...); err != nil {
		if isServerError(err) {
			a := textAnswer{failure: err.Error()}
			s.cache.Add(q, a)
			return a, nil
		}
		return textAnswer{}, err
	}
	var a textAnswer
	for _, v := range vals {
		if !v.Valid {
			a.failure = "the server weighed it as NULL"
			s.cache.Add(q, a)
			return a, nil
		}
	}
	a.lossy = !strings.EqualFold(vals[0].String, h)
	a.chars, _ = strconv.Atoi(vals[1].String)
	if t.pad {
		a.chars, _ = strconv.Atoi(vals[2].String)
	}
	a.octets, _ = strconv.Atoi(vals[3].String)
	w := make([][]byte, t.levels())
	for i := range w {
		var err error
		if w[i], err = hex.DecodeString(vals[4+i].String); err != nil {
			return textAnswer{}, err
		}
	}
	key, err := t.weightsKey(w)
	if err != nil {
		a.failure = err.Error()
	}
	a.key = key
	s.cache.Add(q, a)
	return a, nil
}

// isServerError reports whether err is the server's answer to the query
// (which asking again would not change), not a failure to reach it.
func isServerError(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me)
}
