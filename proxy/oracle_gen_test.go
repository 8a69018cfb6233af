package proxy

import (
	"fmt"
	"math/rand"
	"strings"
)

// The generator of the plan oracle: statements that write the oracle's
// guarded tables in the shapes, spellings, comments, sql_modes and
// parameter types on which lockproxy and MariaDB may disagree about the
// rows a statement changes. It is deterministic in its choices: a seeded
// source gives the fixed corpus, fuzz bytes give FuzzPlanOracle's inputs.

// choices is where the generator's decisions come from.
type choices interface {
	intn(n int) int // in [0, n)
}

// seededChoices draws from a seeded PRNG.
type seededChoices struct{ r *rand.Rand }

func (s seededChoices) intn(n int) int { return s.r.Intn(n) }

// byteChoices draws from fuzz input; once it is used up every choice is 0.
type byteChoices struct {
	b []byte
	i int
}

func (c *byteChoices) intn(n int) int {
	if n <= 1 || c.i >= len(c.b) {
		return 0
	}
	v := int(c.b[c.i])
	c.i++
	if n > 256 && c.i < len(c.b) {
		v = v<<8 | int(c.b[c.i])
		c.i++
	}
	return v % n
}

// binParam is one COM_STMT_EXECUTE parameter of an exact binary type.
type binParam struct {
	typ      byte
	unsigned bool
	val      []byte // the value as the binary protocol encodes it
	show     string // for messages
}

// oracleCase is one statement of the oracle.
type oracleCase struct {
	// Mode is appended to the default sql_mode by a statement of its own
	// before the statement runs ("" for the default).
	Mode string
	// Text is sent by COM_QUERY (it may hold several statements) when
	// Prepare is empty.
	Text string
	// Prepare is sent by COM_STMT_PREPARE and executed once with Params.
	Prepare string
	Params  []binParam
	// Class names the riskiest feature the generator chose: failures are
	// grouped by it.
	Class string
	// Before, when set, changes the session's state after Mode is set and
	// before the statement runs (Setup names what it does).
	Before func(s *oracleSession, o *oracleBed) error
	Setup  string
	// ChangesSession: Text may change the session's character set or
	// database, which the next case must not inherit.
	ChangesSession bool
}

func (c oracleCase) String() string {
	var b strings.Builder
	if c.Mode != "" {
		fmt.Fprintf(&b, "[sql_mode +%s] ", c.Mode)
	}
	if c.Setup != "" {
		fmt.Fprintf(&b, "[after %s] ", c.Setup)
	}
	if c.Prepare == "" {
		fmt.Fprintf(&b, "text %q", c.Text)
		return b.String()
	}
	fmt.Fprintf(&b, "prepared %q with (", c.Prepare)
	for i, p := range c.Params {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p.show)
	}
	b.WriteString(")")
	return b.String()
}

// gen builds one case from its choices.
type gen struct {
	ch    choices
	class string
	prio  int
}

func (g *gen) pick(opts ...string) string { return opts[g.ch.intn(len(opts))] }
func (g *gen) chance(pct int) bool        { return g.ch.intn(100) < pct }

// mark records a feature the case has; the riskiest one (the first of
// the highest priority, see classPriority) names the case's class.
func (g *gen) mark(class string) {
	if p := classPriority(class); g.class == "" || p > g.prio {
		g.class, g.prio = class, p
	}
}

// classPriority ranks features by how likely they are to be why lockproxy
// and MariaDB disagree: what hides a statement from the parser first, the
// value spellings and WHERE shapes last.
func classPriority(class string) int {
	for _, p := range []struct {
		prefix string
		prio   int
	}{
		{"comment ", 9}, {"dynamic SQL", 9}, {"view", 9}, {"CALL", 9}, {"session change", 9},
		{"param ", 8}, {"sql_mode set in the same text", 7}, {"trap: ", 6}, {"sql_mode ", 5},
		{"key change", 4}, {"multi-table", 4}, {"INSERT ... SELECT", 4}, {"number compared", 4},
		{"numeric spelling", 3}, {"string spelling", 3}, {"temporal spelling", 3}, {"client charset", 5}, {"sql_mode empty", 5},
		{"prepared typed key", 7}, {"typed key", 1}, {"shape: ", 2}, {"unguarded", 2},
	} {
		if strings.HasPrefix(class, p.prefix) {
			return p.prio
		}
	}
	return 1
}

// genCase makes one oracle case.
func genCase(ch choices) oracleCase {
	g := &gen{ch: ch}
	c := oracleCase{}
	if g.chance(35) {
		c.Mode = g.pick("ANSI_QUOTES", "NO_BACKSLASH_ESCAPES", "PIPES_AS_CONCAT", "HIGH_NOT_PRECEDENCE",
			"IGNORE_SPACE", "ANSI", "ANSI_QUOTES,NO_BACKSLASH_ESCAPES", "PIPES_AS_CONCAT,HIGH_NOT_PRECEDENCE")
	}
	switch k := g.ch.intn(100); {
	case k < 30:
		g.typedCase(&c)
	case k < 42:
		c.Prepare, c.Params = g.prepared()
	case k < 56:
		c.Text = g.dynamic()
	case k < 59:
		c.Text = g.view()
	case k < 61:
		c.Text = g.call()
	default:
		c.Text = g.decorate(g.statement())
	}
	if c.Prepare == "" && g.chance(12) {
		mode := g.pick("ANSI_QUOTES", "NO_BACKSLASH_ESCAPES", "PIPES_AS_CONCAT", "HIGH_NOT_PRECEDENCE", "ANSI")
		g.mark("sql_mode set in the same text")
		c.Text = g.pick("SET sql_mode = CONCAT(@@sql_mode, ',", "SET SESSION sql_mode = CONCAT(@@sql_mode, ',",
			"SET @@sql_mode = CONCAT(@@session.sql_mode, ',", "SET @@session.sql_mode := CONCAT(@@sql_mode, ',") +
			mode + "'); " + c.Text
	}
	if c.Before == nil && g.chance(10) {
		g.sessionChange(&c)
	}
	if c.Mode != "" && c.Mode != nonStrict {
		g.mark("sql_mode " + c.Mode)
	}
	g.mark("plain")
	c.Class = g.class
	return c
}

// gbkTrap is a text that reads as one keyed row to a parser reading bytes
// and as every row to MariaDB under gbk, where 0xbf 0x5c is one character
// and the quote after it ends the string.
const gbkTrap = "UPDATE sku SET stock = stock + 1 WHERE sku_id = 1001 AND 'x\xbf\\' OR 1=1 -- ' = 'x'"

// sessionChanges change the session's character set, sql_mode or database
// by every route MariaDB offers, each a list of statements sent alone.
var sessionChanges = []struct {
	name  string
	stmts []string
	gbk   bool
}{
	{"SET NAMES gbk", []string{"SET NAMES gbk"}, true},
	{"SET CHARACTER SET gbk", []string{"SET CHARACTER SET gbk"}, true},
	{"character_set_client by number", []string{"SET character_set_client = 28"}, true},
	{"character_set_client from a variable", []string{"SET @v = 'gbk'", "SET character_set_client = @v"}, true},
	{"character_set_client from adjacent strings", []string{"SET character_set_client = 'gb' 'k'"}, true},
	{"EXECUTE IMMEDIATE of SET NAMES", []string{"EXECUTE IMMEDIATE 'SET NAMES gbk'"}, true},
	{"PREPARE and EXECUTE of SET NAMES", []string{"PREPARE set_cs FROM 'SET NAMES gbk'", "EXECUTE set_cs"}, true},
	{"executable comment", []string{"/*!40101 SET NAMES gbk */"}, true},
	{"SET NAMES latin1", []string{"SET NAMES latin1"}, false},
	{"EXECUTE IMMEDIATE of sql_mode", []string{"EXECUTE IMMEDIATE 'SET sql_mode = CONCAT(@@sql_mode, '',ANSI_QUOTES,NO_BACKSLASH_ESCAPES'')'"}, false},
	{"USE of another database", []string{"USE information_schema"}, false},
	{"USE through EXECUTE IMMEDIATE", []string{"USE information_schema", "EXECUTE IMMEDIATE 'SELECT 1'", "USE {db}"}, false},
}

// sessionChange changes the session's state before c's statement, in a
// command of its own or at the head of the same text; under gbk the
// statement is often the trap.
func (g *gen) sessionChange(c *oracleCase) {
	if c.Prepare == "" && g.chance(40) {
		g.mark("session change in the same text")
		c.ChangesSession = true
		c.Text = g.pick("SET NAMES gbk; ", "SET CHARACTER SET gbk; ", "/*!40101 SET NAMES gbk */; ", "SET character_set_client = latin1; ",
			"USE {db}; ", "USE information_schema; USE {db}; ", "SET NAMES utf8mb4; ", "USE information_schema; ") + c.Text
		return
	}
	ch := sessionChanges[g.ch.intn(len(sessionChanges))]
	g.mark("session change before: " + ch.name)
	if ch.gbk && c.Prepare == "" && g.chance(50) {
		c.Text = gbkTrap
	}
	c.Setup = ch.name
	c.Before = func(s *oracleSession, o *oracleBed) error {
		for _, q := range ch.stmts {
			if err := s.exec(strings.ReplaceAll(q, "{db}", o.db)); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	}
}

// Key rows: existing ones, and new ones for INSERT.
var (
	skuKeys   = []int64{1001, 1002, 1003, 1004, 1005, 7, 100, 200, 2001, 30000, 70000, 1100, 1101, 1102}
	acctKeys  = []string{"alice", "bob", "Carol", "dave", "1001", "erin", "Frank", "josé", "i"}
	binShops  = []int64{1, 2, 3}
	binCodes  = []string{"a", "b", "B2", "c"}
	intTables = []string{"sku", "acct", "bin"}
)

// intLit spells the integer n in one of the ways MariaDB reads as n (or,
// for a few, as something near it: MariaDB decides).
func (g *gen) intLit(n int64) string {
	switch g.ch.intn(24) {
	case 0:
		g.mark("numeric spelling: quoted")
		return fmt.Sprintf("'%d'", n)
	case 1:
		g.mark("numeric spelling: decimal")
		return fmt.Sprintf("%d.0", n)
	case 2:
		g.mark("numeric spelling: exponent")
		return fmt.Sprintf("%de0", n)
	case 3:
		g.mark("numeric spelling: exponent")
		return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.5f", float64(n)/1000), "0"), ".") + "e3"
	case 4:
		g.mark("numeric spelling: hex")
		return fmt.Sprintf("0x%X", n)
	case 5:
		g.mark("numeric spelling: introducer")
		return fmt.Sprintf("_utf8mb4'%d'", n)
	case 6:
		g.mark("numeric spelling: quoted with spaces")
		return fmt.Sprintf("' %d '", n)
	case 7:
		g.mark("numeric spelling: trailing garbage")
		return fmt.Sprintf("'%dabc'", n)
	case 8:
		g.mark("numeric spelling: fraction")
		return fmt.Sprintf("%d.4", n)
	case 9:
		g.mark("numeric spelling: expression")
		return fmt.Sprintf("%d + 0", n)
	case 10:
		g.mark("numeric spelling: --1")
		return fmt.Sprintf("%d --1", n-1)
	case 11:
		g.mark("numeric spelling: bit literal")
		return fmt.Sprintf("b'%b'", n)
	case 12:
		g.mark("numeric spelling: hex string")
		return fmt.Sprintf("X'%04X'", n)
	case 13:
		g.mark("numeric spelling: unary")
		return fmt.Sprintf("-(-%d)", n)
	case 14:
		g.mark("numeric spelling: quoted fraction")
		return fmt.Sprintf("'%d.0'", n)
	case 15:
		g.mark("numeric spelling: past 38 fraction digits")
		return fmt.Sprintf("'%d.%s1'", n, strings.Repeat("0", 39))
	case 16:
		g.mark("numeric spelling: past 38 fraction digits")
		return fmt.Sprintf("'%d.%s'", n-1, strings.Repeat("9", 42))
	case 17:
		g.mark("numeric spelling: introducer on hex")
		return fmt.Sprintf("_latin1 X'%X'", fmt.Sprint(n))
	case 18:
		g.mark("numeric spelling: underflowing exponent")
		return fmt.Sprintf("'%de-400'", n)
	}
	return fmt.Sprint(n)
}

// latin1Hex is s (UTF-8, every character in latin1) as latin1 bytes in hex.
func latin1Hex(s string) string {
	var b strings.Builder
	for _, r := range s {
		fmt.Fprintf(&b, "%02X", byte(r))
	}
	return b.String()
}

// strLit spells the string s, with case, space and collation variants.
func (g *gen) strLit(s string) string {
	q := func(v string) string { return "'" + strings.ReplaceAll(v, "'", "''") + "'" }
	switch g.ch.intn(18) {
	case 0:
		g.mark("string spelling: upper case")
		return q(strings.ToUpper(s))
	case 1:
		g.mark("string spelling: trailing spaces")
		return q(s + "  ")
	case 2:
		g.mark("string spelling: introducer")
		return "_utf8mb4" + q(strings.ToUpper(s[:1])+s[1:])
	case 3:
		g.mark("string spelling: hex")
		return fmt.Sprintf("X'%X'", s)
	case 4:
		g.mark("string spelling: COLLATE")
		return q(s) + " COLLATE utf8mb4_bin"
	case 5:
		g.mark("string spelling: CONCAT")
		return "CONCAT(" + q(s[:1]) + ", " + q(s[1:]) + ")"
	case 6:
		if s[0] == 'a' {
			g.mark("string spelling: accent")
			return q("á" + s[1:])
		}
	case 7:
		g.mark("string spelling: N''")
		return "N" + q(s)
	case 8:
		g.mark("string spelling: mixed case and space")
		return q(strings.ToUpper(s[:1]) + s[1:] + " ")
	case 9:
		if strings.Contains(s, "i") {
			g.mark("string spelling: dotless i")
			return q(strings.ReplaceAll(s, "i", "ı"))
		}
	case 10:
		g.mark("string spelling: latin1 introducer on hex")
		return "_latin1 X'" + latin1Hex(s) + "'"
	case 11:
		g.mark("string spelling: trailing no-break space")
		return q(s + "\u00a0")
	case 12:
		if strings.Contains(s, "é") {
			g.mark("string spelling: accent folded")
			return q(strings.ReplaceAll(s, "é", "E"))
		}
	}
	return q(s)
}

// table is one guarded table for a statement, with its key predicates.
type table struct {
	name    string
	col     string // a non-key column
	keyCols []string
}

func (g *gen) table() table {
	switch g.pick(intTables...) {
	case "acct":
		return table{"acct", "bal", []string{"name"}}
	case "bin":
		return table{"bin", "qty", []string{"shop_id", "code"}}
	}
	return table{"sku", "stock", []string{"sku_id"}}
}

// keyValues returns one row's key literals for t.
func (g *gen) keyValues(t table) []string {
	switch t.name {
	case "acct":
		if g.chance(4) {
			g.mark("number compared with a string key")
			return []string{g.pick("0", "1001", "1001.0")}
		}
		return []string{g.strLit(g.pick(acctKeys...))}
	case "bin":
		return []string{g.intLit(binShops[g.ch.intn(len(binShops))]), g.strLit(g.pick(binCodes...))}
	}
	return []string{g.intLit(skuKeys[g.ch.intn(len(skuKeys))])}
}

// keyEq is "key = value" for one row (ANDed for a composite key).
func (g *gen) keyEq(t table, prefix string) string {
	vals := g.keyValues(t)
	var parts []string
	for i, c := range t.keyCols {
		parts = append(parts, prefix+c+" = "+vals[i])
	}
	return strings.Join(parts, " AND ")
}

// where returns a WHERE clause (with the keyword) or "".
func (g *gen) where(t table) string {
	k := t.keyCols[0]
	single := len(t.keyCols) == 1
	var w string
	switch n := g.ch.intn(24); {
	case n < 6:
		w = g.keyEq(t, "")
	case n == 6:
		w = g.keyEq(t, "") + " OR " + g.keyEq(t, "")
		g.mark("shape: OR")
	case n == 7 && single:
		w = k + " IN (" + g.keyValues(t)[0] + ", " + g.keyValues(t)[0] + ")"
	case n == 7:
		a, b := g.keyValues(t), g.keyValues(t)
		w = "(shop_id, code) IN ((" + a[0] + ", " + a[1] + "), (" + b[0] + ", " + b[1] + "))"
		g.mark("shape: row constructor")
	case n == 8:
		w = g.keyEq(t, "") + " AND " + t.col + " >= 0"
	case n == 9 && single:
		w = "(" + k + ") = (" + g.keyValues(t)[0] + ")"
		g.mark("shape: row constructor")
	case n == 9:
		a := g.keyValues(t)
		w = "(shop_id, code) = (" + a[0] + ", " + a[1] + ")"
		g.mark("shape: row constructor")
	case n == 10 && g.chance(50):
		v := g.keyValues(t)[0]
		w = k + " BETWEEN " + v + " AND " + v
		g.mark("shape: BETWEEN one value")
	case n == 10:
		w = k + " BETWEEN " + g.keyValues(t)[0] + " AND " + g.keyValues(t)[0]
		g.mark("shape: BETWEEN")
	case n == 11:
		w = k + g.pick(" > ", " >= ", " < ") + g.keyValues(t)[0]
		g.mark("shape: range")
	case n == 12 && t.name == "sku":
		w = "sku_id IN (SELECT id + 1000 FROM free WHERE id = " + fmt.Sprint(1+g.ch.intn(4)) + ")"
		g.mark("shape: subquery")
	case n == 12:
		w = k + " IN (SELECT " + k + " FROM " + t.name + " WHERE " + t.col + " > 15)"
		g.mark("shape: subquery")
	case n == 13:
		w = "NOT (" + k + " <> " + g.keyValues(t)[0] + ")"
		g.mark("shape: NOT")
	case n == 14:
		w = "NOT " + k + " <> " + g.keyValues(t)[0]
		g.mark("trap: HIGH_NOT_PRECEDENCE")
	case n == 15:
		w = k + " LIKE " + g.pick("'1001'", "'ali%'", "'a'", "'B_'", "'%'")
		g.mark("shape: LIKE")
	case n == 16:
		w = t.col + " = 0"
		g.mark("shape: non-key column")
	case n == 17:
		w = k + ` = "` + g.pick(k, "1001", "alice", "a") + `"`
		g.mark("trap: double quotes (ANSI_QUOTES)")
	case n == 18:
		w = k + " = " + g.pick("'10' || '01'", "'ali' || 'ce'", "'B' || '2'")
		g.mark("trap: || (PIPES_AS_CONCAT)")
	case n == 19:
		w = k + " = " + g.pick(`'1001\' OR 1=1 -- '`, `'bob\' OR 1=1 -- '`, `'a\' OR 1=1 -- '`) + "\n"
		g.mark("trap: backslash (NO_BACKSLASH_ESCAPES)")
	case n == 20:
		w = k + " = " + g.pick("ABS (1001)", "CAST (1001 AS SIGNED)", "LOWER ('ALICE')", "TRIM ('bob ')")
		g.mark("trap: function and space (IGNORE_SPACE)")
	case n == 21:
		return ""
	case n == 22:
		w = k + " IN (SELECT " + g.keyValues(t)[0] + ")"
		g.mark("shape: IN one-value subquery")
	default:
		w = g.keyEq(t, "")
	}
	return " WHERE " + w
}

func (g *gen) insertRow(t table) string {
	vals := g.keyValues(t)
	return "(" + strings.Join(vals, ", ") + ", " + fmt.Sprint(g.ch.intn(50)) + ")"
}

func (g *gen) columns(t table) string {
	return "(" + strings.Join(append(append([]string{}, t.keyCols...), t.col), ", ") + ")"
}

// statement is one write of a guarded table in some shape.
func (g *gen) statement() string {
	t := g.table()
	name := t.name
	if g.chance(8) {
		name = g.pick("`"+t.name+"`", `"`+t.name+`"`, "{db}."+t.name, strings.ToUpper(t.name))
	}
	switch n := g.ch.intn(100); {
	case n < 30:
		set := t.col + " = " + g.pick(t.col+" + 1", "7", t.col+" - 1")
		if g.chance(10) {
			set = g.keyChange(t)
			g.mark("key change")
		}
		tail := ""
		if g.chance(10) {
			tail = " ORDER BY " + t.keyCols[0] + " LIMIT 1"
		}
		return "UPDATE " + g.pick("", "LOW_PRIORITY ", "IGNORE ") + name + " SET " + set + g.where(t) + tail
	case n < 45:
		return "DELETE " + g.pick("", "QUICK ", "IGNORE ") + "FROM " + name + g.where(t)
	case n < 60:
		g.mark("INSERT")
		switch g.ch.intn(5) {
		case 0:
			return "INSERT INTO " + name + " SET " + g.keyEq(t, "") + ", " + t.col + " = 1"
		case 1:
			g.mark("INSERT ... SELECT")
			return "INSERT IGNORE INTO " + name + " " + g.columns(t) + " SELECT " + g.selectKeys(t) + ", 1 FROM free WHERE id = " +
				fmt.Sprint(1+g.ch.intn(4))
		case 2:
			return "INSERT INTO " + name + " VALUES " + g.insertRow(t)
		}
		return "INSERT " + g.pick("", "IGNORE ") + "INTO " + name + " " + g.columns(t) + " VALUES " + g.insertRow(t) + ", " + g.insertRow(t)
	case n < 72:
		g.mark("INSERT ... ON DUPLICATE KEY UPDATE")
		upd := g.pick(t.col+" = "+t.col+" + 1", t.col+" = VALUES("+t.col+")", g.keyChange(t))
		return "INSERT INTO " + name + " " + g.columns(t) + " VALUES " + g.insertRow(t) + " ON DUPLICATE KEY UPDATE " + upd
	case n < 82:
		g.mark("REPLACE")
		if g.chance(20) {
			return "REPLACE INTO " + name + " " + g.columns(t) + " SELECT " + g.selectKeys(t) + ", 2 FROM free WHERE id = " + fmt.Sprint(1+g.ch.intn(4))
		}
		return "REPLACE INTO " + name + " " + g.columns(t) + " VALUES " + g.insertRow(t)
	case n < 97:
		return g.multiTable()
	}
	g.mark("unguarded table")
	return "UPDATE free SET v = v + 1 WHERE id = " + fmt.Sprint(1+g.ch.intn(4))
}

// keyChange is a SET that moves rows to another key.
func (g *gen) keyChange(t table) string {
	switch t.name {
	case "acct":
		return g.pick("name = CONCAT(name, 'x')", "name = UPPER(name)", "name = "+g.strLit(g.pick(acctKeys...)))
	case "bin":
		return g.pick("code = CONCAT(code, 'z')", "shop_id = shop_id + 10")
	}
	return g.pick("sku_id = sku_id + 500", "sku_id = "+g.intLit(skuKeys[g.ch.intn(len(skuKeys))]))
}

// selectKeys is a select list of key values taken from table free.
func (g *gen) selectKeys(t table) string {
	switch t.name {
	case "acct":
		return "CONCAT('n', id)"
	case "bin":
		return "id, 'a'"
	}
	return "id + 1000"
}

func (g *gen) multiTable() string {
	g.mark("multi-table")
	v := fmt.Sprint(1 + g.ch.intn(4))
	sku := g.keyEq(table{"sku", "stock", []string{"sku_id"}}, "s.")
	acct := g.keyEq(table{"acct", "bal", []string{"name"}}, "a.")
	switch g.ch.intn(9) {
	case 0:
		return "UPDATE sku JOIN free ON sku.sku_id = free.id + 1000 SET sku.stock = sku.stock + 1 WHERE free.id = " + v
	case 1:
		return "UPDATE sku s, acct a SET s.stock = 1, a.bal = 1 WHERE " + sku + " AND " + acct
	case 2:
		return "UPDATE free, sku s SET free.v = 9 WHERE " + sku + " AND free.id = " + v
	case 3:
		return "DELETE sku FROM sku JOIN free ON sku.sku_id = free.id + 1000 WHERE free.id = " + v
	case 4:
		return "DELETE s FROM sku AS s WHERE " + sku
	case 5:
		return "DELETE FROM sku USING sku, free WHERE sku.sku_id = free.id + 1000 AND free.id = " + v
	case 6:
		return "DELETE s, a FROM sku s, acct a WHERE " + sku + " AND " + acct
	case 7:
		return "UPDATE sku s SET s.stock = (SELECT v FROM free WHERE id = " + v + ") WHERE " + sku
	}
	return "UPDATE sku s JOIN acct a ON a.bal = s.stock SET s.stock = s.stock + 1, a.bal = a.bal + 1 WHERE " + sku
}
