package proxy

import (
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/rules"
)

// oracleCorpusSize is the number of statements of the fixed corpus; every
// autocommitEvery-th statement that changes guarded rows is also run in
// autocommit against a session holding those rows' locks.
const (
	oracleCorpusSize = 2400
	oracleSeed       = 20260501
	autocommitEvery  = 6
)

// oracleSession is one client session through the proxy, in raw protocol
// so that parameters go with exact binary types.
type oracleSession struct {
	r  *rawConn
	id uint32 // the session id SHOW LOCKPROXY LOCKS shows
	// db is the session's database; changed: a case may have changed its
	// character set or database, which setMode puts back.
	db      string
	changed bool
}

func (o *oracleBed) session(t *testing.T) *oracleSession {
	t.Helper()
	r := dialRaw(t, o.p.addr, o.p.bed.User, o.p.bed.Password, o.db, false,
		mysql.CLIENT_MULTI_STATEMENTS, mysql.CLIENT_MULTI_RESULTS)
	return &oracleSession{r: r, id: r.c.GetConnectionID(), db: o.db}
}

// exec sends q by COM_QUERY and reads every result; the first error ends it.
func (s *oracleSession) exec(q string) error {
	s.r.send(append([]byte{mysql.COM_QUERY}, q...)...)
	return s.results()
}

// results reads results until the server says no more follow.
func (s *oracleSession) results() error {
	r := s.r
	for {
		p := r.read()
		var status uint16
		switch p[0] {
		case mysql.OK_HEADER:
			status = r.c.HandleOKPacket(p).Status
		case mysql.ERR_HEADER:
			return r.c.HandleErrorPacket(p)
		default:
			r.columns(int(p[0]))
			for p = r.read(); !r.isEnd(p); p = r.read() {
				if p[0] == mysql.ERR_HEADER {
					return r.c.HandleErrorPacket(p)
				}
			}
			status = binary.LittleEndian.Uint16(p[3:5])
		}
		if status&mysql.SERVER_MORE_RESULTS_EXISTS == 0 {
			return nil
		}
	}
}

// prepared runs q by COM_STMT_PREPARE, COM_STMT_EXECUTE with params bound
// by their binary types, and COM_STMT_CLOSE.
func (s *oracleSession) prepared(q string, params []binParam) error {
	r := s.r
	r.send(append([]byte{mysql.COM_STMT_PREPARE}, q...)...)
	p := r.read()
	if p[0] == mysql.ERR_HEADER {
		return r.c.HandleErrorPacket(p)
	}
	id := binary.LittleEndian.Uint32(p[1:])
	cols, n := int(binary.LittleEndian.Uint16(p[5:])), int(binary.LittleEndian.Uint16(p[7:]))
	r.columns(n)
	r.columns(cols)
	defer r.send(stmtPayload(mysql.COM_STMT_CLOSE, id)...)
	if n != len(params) {
		return fmt.Errorf("statement has %d placeholders, the case %d parameters", n, len(params))
	}
	b := binary.LittleEndian.AppendUint32([]byte{mysql.COM_STMT_EXECUTE}, id)
	b = binary.LittleEndian.AppendUint32(append(b, 0), 1)
	b = append(b, make([]byte, (len(params)+7)/8)...)
	b = append(b, 1)
	for _, p := range params {
		flag := byte(0)
		if p.unsigned {
			flag = 0x80
		}
		b = append(b, p.typ, flag)
	}
	for _, p := range params {
		b = append(b, p.val...)
	}
	r.send(b...)
	return s.results()
}

// run sends the case's statement.
func (s *oracleSession) run(o *oracleBed, c oracleCase) error {
	s.changed = s.changed || c.ChangesSession
	if c.Prepare != "" {
		return s.prepared(strings.ReplaceAll(c.Prepare, "{db}", o.db), c.Params)
	}
	return s.exec(strings.ReplaceAll(c.Text, "{db}", o.db))
}

// setMode resets sql_mode and appends the case's modes, in statements of
// their own.
func (s *oracleSession) setMode(mode string) error {
	if s.changed {
		for _, q := range []string{"SET NAMES utf8mb4", "USE `" + s.db + "`"} {
			if err := s.exec(q); err != nil {
				return err
			}
		}
		s.changed = false
	}
	if err := s.exec("SET sql_mode = DEFAULT"); err != nil {
		return err
	}
	switch mode {
	case "":
		return nil
	case nonStrict:
		return s.exec("SET sql_mode = ''")
	}
	return s.exec("SET sql_mode = CONCAT(@@sql_mode, '," + mode + "')")
}

// refusal reports whether err is lockproxy refusing the statement: its own
// 1105 (message "lockproxy: ..."), naming one of the oracle's rules.
func refusal(err error) (refused bool, why string) {
	var me *mysql.MyError
	if !errors.As(err, &me) || !strings.HasPrefix(me.Message, "lockproxy:") {
		return false, ""
	}
	if me.Code != 1105 {
		return false, fmt.Sprintf("lockproxy error %d, not 1105: %s", me.Code, me.Message)
	}
	if !strings.Contains(me.Message, "oracle-") {
		return true, "1105 does not name the rule: " + me.Message
	}
	return true, ""
}

// verdict is what the oracle made of one case.
type verdict struct {
	c        oracleCase
	mode     string // "transaction" or "autocommit"
	err      error
	refused  bool
	locked   []string
	changed  []string
	failure  string // "" when lockproxy kept its promise
	mariaErr bool   // MariaDB rejected the statement itself
}

func (v verdict) String() string {
	return fmt.Sprintf("%s in %s: %s\n    error: %v\n    locked:  %v\n    changed: %v",
		v.failure, v.mode, v.c, v.err, v.locked, v.changed)
}

// inTransaction runs c between BEGIN and ROLLBACK and judges it: refused
// (and nothing changed), or every guarded row MariaDB changed locked.
func (o *oracleBed) inTransaction(t *testing.T, s *oracleSession, observer *sql.DB, c oracleCase) verdict {
	t.Helper()
	v := verdict{c: c, mode: "transaction"}
	if err := s.setMode(c.Mode); err != nil {
		t.Fatalf("SET sql_mode for %s: %v", c, err)
	}
	if c.Before != nil {
		s.changed = true
		if err := c.Before(s, o); err != nil {
			t.Fatalf("setting up %s: %v", c, err)
		}
	}
	if err := s.exec("BEGIN"); err != nil {
		t.Fatalf("BEGIN before %s: %v", c, err)
	}
	v.err = s.run(o, c)
	v.locked = heldKeys(t, observer, s.id)
	changed, err := o.changedKeys(t)
	if err != nil {
		t.Fatalf("side table after %s: %v", c, err)
	}
	v.changed = changed
	if err := s.exec("ROLLBACK"); err != nil {
		v.failure = "ROLLBACK failed: " + err.Error()
	}
	if n := o.committedChanges(t); n > 0 {
		if v.failure == "" {
			v.failure = fmt.Sprintf("%d changes survived ROLLBACK (the statement ran outside the transaction)", n)
		}
		o.reseed(t)
	}
	o.judge(&v)
	return v
}

// judge sets v.failure (unless already set) and v.refused.
func (o *oracleBed) judge(v *verdict) {
	refused, why := refusal(v.err)
	v.refused = refused
	if v.err != nil && !refused && why == "" {
		v.mariaErr = true
	}
	switch {
	case v.failure != "":
	case why != "":
		v.failure = why
	case refused && len(v.changed) > 0:
		v.failure = "refused, yet MariaDB changed rows"
	case len(missing(v.changed, v.locked)) > 0:
		v.failure = fmt.Sprintf("changed rows not locked %v", missing(v.changed, v.locked))
	}
}

// oracleReport gathers verdicts and reports failures grouped by the
// generator's class, a few examples each.
type oracleReport struct {
	total, refused, mariaErr, ok int // refused: also lockproxy's 1205 under a held lock
	failed                       map[string][]verdict
}

func (r *oracleReport) add(v verdict) {
	r.total++
	switch {
	case v.failure != "":
		if r.failed == nil {
			r.failed = map[string][]verdict{}
		}
		r.failed[v.c.Class] = append(r.failed[v.c.Class], v)
	case v.refused:
		r.refused++
	case v.mariaErr:
		r.mariaErr++
	default:
		r.ok++
	}
}

// finish fails t once per class of failures. With LOCKPROXY_ORACLE_LOG
// set, every failure is also written to that path, suffixed with the
// last element of t's name.
func (r *oracleReport) finish(t *testing.T) {
	t.Helper()
	t.Logf("oracle: %d statements: %d locked correctly, %d stopped by lockproxy (refused, or waited for a held lock), %d rejected by MariaDB, %d failures",
		r.total, r.ok, r.refused, r.mariaErr, r.total-r.ok-r.refused-r.mariaErr)
	if r.total > 20 && r.mariaErr*4 > r.total {
		t.Errorf("oracle: %d of %d statements are invalid for MariaDB: the generator wastes its corpus", r.mariaErr, r.total)
	}
	classes := make([]string, 0, len(r.failed))
	for c := range r.failed {
		classes = append(classes, c)
	}
	sort.Slice(classes, func(i, j int) bool { return len(r.failed[classes[i]]) > len(r.failed[classes[j]]) })
	var all strings.Builder
	for _, c := range classes {
		vs := r.failed[c]
		var ex strings.Builder
		for i, v := range vs {
			fmt.Fprintf(&all, "[%s] %s\n", c, v)
			if i < 3 {
				fmt.Fprintf(&ex, "\n  %s", v)
			}
		}
		t.Errorf("oracle: %d failures in class %q, e.g.:%s", len(vs), c, ex.String())
	}
	if path := os.Getenv("LOCKPROXY_ORACLE_LOG"); path != "" {
		path += "." + t.Name()[strings.LastIndex(t.Name(), "/")+1:]
		if err := os.WriteFile(path, []byte(all.String()), 0o644); err != nil {
			t.Errorf("LOCKPROXY_ORACLE_LOG: %v", err)
		}
	}
}

// TestPlanOracle runs the fixed, seeded corpus: each statement in a
// transaction, and a slice of them in autocommit against a held lock.
func TestPlanOracle(t *testing.T) {
	runPlanOracle(t, "lockproxy_oracle", oracleOptions{quiet: true}, 1)
}

// TestPlanOracleMultiplexed runs every fourth case of the corpus through
// a lockproxy that multiplexes (backends.pool.multiplex) its sessions
// over three primary connections: the session, the lock holder and the
// observer borrow them in turn, and what each statement locked and
// changed must be what it is when every session keeps its connection.
func TestPlanOracleMultiplexed(t *testing.T) {
	runPlanOracle(t, "lockproxy_oracle_mux", oracleOptions{quiet: true, multiplex: true}, 4)
}

// runPlanOracle runs every every-th case of the corpus on a fresh oracle
// database db.
func runPlanOracle(t *testing.T, db string, opt oracleOptions, every int) {
	o := startOracle(t, testbed.Get(t), db, opt)
	s := o.session(t)
	observer := o.p.db(t, o.db, "")
	holder := o.session(t)
	rng := seededChoices{rand.New(rand.NewSource(oracleSeed))}
	var inTxn, auto, reported, reportedAuto oracleReport
	changing := 0
	for i := 0; i < oracleCorpusSize; i++ {
		c := genCase(rng)
		if i%every != 0 {
			continue
		}
		v := o.inTransaction(t, s, observer, c)
		inTxn.add(v)
		if c.Before != nil {
			// Again with the session blind to what its statements may
			// change: the server's reports alone must keep it right.
			o.p.srv.unforeseen.Store(true)
			reported.add(o.inTransaction(t, s, observer, c))
			o.p.srv.unforeseen.Store(false)
		}
		if v.refused || len(v.changed) == 0 || v.failure != "" {
			continue
		}
		changing++
		if changing%autocommitEvery == 0 {
			auto.add(o.underHeldLock(t, s, holder, observer, c, v.changed))
		}
		if c.Before != nil {
			// Blind again, in autocommit against a held lock.
			o.p.srv.unforeseen.Store(true)
			reportedAuto.add(o.underHeldLock(t, s, holder, observer, c, v.changed))
			o.p.srv.unforeseen.Store(false)
		}
	}
	t.Run("transaction", inTxn.finish)
	t.Run("autocommit", auto.finish)
	t.Run("reported", reported.finish)
	t.Run("reported autocommit", reportedAuto.finish)
}

// underHeldLock runs c in autocommit while holder holds the locks of the
// rows c changed in a transaction (taken by plain reads in holder's
// transaction, which lock nothing in InnoDB, so only lockproxy can stop
// c). c must then wait (lockproxy's 1205) or be refused, and change none
// of those rows.
func (o *oracleBed) underHeldLock(t *testing.T, s, holder *oracleSession, observer *sql.DB, c oracleCase, keys []string) verdict {
	t.Helper()
	v := verdict{c: c, mode: "autocommit, rows' locks held by another session"}
	if err := holder.exec("BEGIN"); err != nil {
		t.Fatalf("holder BEGIN: %v", err)
	}
	defer func() {
		if err := holder.exec("ROLLBACK"); err != nil {
			t.Fatalf("holder ROLLBACK: %v", err)
		}
	}()
	for _, k := range keys {
		q, err := o.readingKey(k)
		if err != nil {
			t.Fatalf("lock %s for %s: %v", k, c, err)
		}
		if err := holder.exec(q); err != nil {
			t.Fatalf("holder %s: %v", q, err)
		}
	}
	if held := heldKeys(t, observer, holder.id); len(missing(keys, held)) > 0 {
		t.Fatalf("holder could not take %v (holds %v) for %s", keys, held, c)
	}
	v.locked = keys
	if err := s.setMode(c.Mode); err != nil {
		t.Fatalf("SET sql_mode for %s: %v", c, err)
	}
	if c.Before != nil {
		s.changed = true
		if err := c.Before(s, o); err != nil {
			t.Fatalf("setting up %s: %v", c, err)
		}
	}
	v.err = s.run(o, c)
	changed, err := o.changedKeys(t)
	if err != nil {
		t.Fatalf("side table after %s: %v", c, err)
	}
	v.changed = changed
	if len(changed) > 0 || o.committedChanges(t) > 0 {
		o.reseed(t)
	}
	var me *mysql.MyError
	waited := errors.As(v.err, &me) && me.Code == 1205 && strings.HasPrefix(me.Message, "lockproxy:")
	refused, _ := refusal(v.err)
	v.refused = refused || waited
	switch touched := intersect(keys, changed); {
	case len(touched) > 0:
		v.failure = fmt.Sprintf("changed rows %v while another session held their locks", touched)
	case v.err == nil:
		v.failure = "ran at once while another session held the locks of its rows"
	case !v.refused:
		v.failure = "neither waited (lockproxy 1205) nor was refused (lockproxy 1105)"
	}
	return v
}

func intersect(a, b []string) []string {
	in := map[string]bool{}
	for _, k := range b {
		in[k] = true
	}
	var out []string
	for _, k := range a {
		if in[k] {
			out = append(out, k)
		}
	}
	return out
}

// readingKey is a plain SELECT of the row a lock key names: in a
// transaction it takes that key's lock (read_in_txn).
func (o *oracleBed) readingKey(key string) (string, error) {
	for _, tb := range oracleTables {
		prefix := strings.ToLower(o.db) + "." + tb.name + "/"
		if !strings.HasPrefix(key, prefix) {
			continue
		}
		_, _, vals, err := rules.DecodeKey(key)
		if err != nil {
			return "", err
		}
		if row, ok := o.stored[key]; ok {
			vals = row // the row's own values: a key of weights does not spell them
		}
		var conds []string
		info := o.schema.Table(o.db, tb.name)
		for i, col := range tb.keys {
			v := string(vals[i])
			if c := info.Column(col); c != nil && strings.Contains(c.DataType, "int") {
				// A number, as a number: a string beyond 2^53 compares
				// inexactly with an integer column.
				if _, err := strconv.ParseUint(strings.TrimPrefix(v, "-"), 10, 64); err == nil {
					conds = append(conds, col+" = "+v)
					continue
				}
			}
			conds = append(conds, col+" = '"+strings.ReplaceAll(v, "'", "''")+"'")
		}
		return "SELECT 1 FROM " + tb.name + " WHERE " + strings.Join(conds, " AND "), nil
	}
	return "", fmt.Errorf("no oracle table for key %s", key)
}

// FuzzPlanOracle drives the generator from the fuzz input (each byte a
// choice) and judges up to four statements per input in a transaction.
// It needs a bed (LOCKPROXY_TESTBED, as scripts/test.sh sets); its
// database is its own, so it may share a bed.
func FuzzPlanOracle(f *testing.F) {
	for _, seed := range [][]byte{
		{},
		{0, 50, 1, 2, 3, 4, 5, 6, 7, 8, 9},
		{99, 10, 200, 17, 60, 3, 3, 14, 1, 2},
		{34, 21, 45, 17, 4, 9, 0, 5, 30, 30},
		{10, 40, 11, 13, 6, 1, 2, 3},
	} {
		f.Add(seed)
	}
	// Each fuzzing process (the coordinator and every worker) runs this
	// set-up: a database of its own, or they would drop each other's.
	db := "lockproxy_oracle_fuzz_" + strconv.Itoa(os.Getpid())
	o := startOracle(f, testbed.Get(f), db, oracleOptions{quiet: true})
	f.Cleanup(func() { _, _ = o.direct.Exec("DROP DATABASE IF EXISTS `" + db + "`") })
	observer := o.p.db(f, o.db, "")
	f.Fuzz(func(t *testing.T, data []byte) {
		s := o.session(t)
		ch := &byteChoices{b: data}
		for i := 0; i < 4 && (i == 0 || ch.i < len(ch.b)); i++ {
			if v := o.inTransaction(t, s, observer, genCase(ch)); v.failure != "" {
				t.Fatal(v)
			}
		}
	})
}
