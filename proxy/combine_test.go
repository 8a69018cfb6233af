package proxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr/redislock/redislocktest"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/redislock"
	"github.com/lockproxy/lockproxy/parser"
	"github.com/lockproxy/lockproxy/rules"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// comboRules is a combining rule on db.sku_stock: locking (lock: [write],
// the batch holds the row's lock) or optimistic (lock: []); its batches
// write their markers into db.lockproxy_combine, or none with marker
// rules.CombineMarkerNone.
func comboRules(db string, locking, multiplex bool, marker ...string) func(*rules.Config) {
	table := db + ".lockproxy_combine"
	if len(marker) > 0 {
		table = marker[0]
	}
	return func(c *rules.Config) {
		c.Backends.Pool.Multiplex = multiplex
		lock := []string{}
		if locking {
			lock = []string{rules.LockWrite}
		}
		zero := 0.0
		c.Rules = []rules.Rule{{Name: "sku", Table: db + ".sku_stock", Key: []string{"sku_id"}, Lock: lock,
			OnUnkeyed: rules.OnUnkeyedReject, OnUnkeyedRead: rules.OnUnkeyedAllow, Mode: rules.ModeEnforce,
			WaitTimeout: rules.Duration(30 * time.Second),
			Rewrite: &rules.Rewrite{Column: "stock", Mode: rules.RewriteDelta, Min: &zero, Scope: rules.ScopeTransaction,
				OnConflict: rules.OnConflictError, OnUnpaired: rules.OnUnpairedAllow},
			Combine: &rules.Combine{MaxBatch: rules.DefaultCombineMaxBatch, MarkerTable: table}}}
	}
}

// comboBed is two lockproxy instances sharing one Redis in front of the
// bed's primary, and a fresh database with the stock table.
type comboBed struct {
	db string
	// multiplex: the instances multiplex (backends.pool.multiplex).
	multiplex bool
	p         [2]*testProxy
	rdb       *redis.Client
	prefix    string
	stmtText  string
	stmtPrep  string
}

const comboTTL = 900 * time.Millisecond

func startComboBed(t *testing.T, locking bool, marker ...string) *comboBed {
	t.Helper()
	return startComboBedMux(t, locking, true, marker...)
}

// startComboBedMux is startComboBed with instances that multiplex or
// pin a connection to each session.
func startComboBedMux(t *testing.T, locking, multiplex bool, marker ...string) *comboBed {
	t.Helper()
	base := startProxy(t, nil)
	db := freshDB(t, base)
	testbed.MustExec(t, base.direct(t, db, ""),
		"CREATE TABLE sku_stock (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL, CONSTRAINT stock_nonneg CHECK (stock >= 0))")
	// A stored function that reads ROW_COUNT() where the statement that
	// calls it does not name it.
	testbed.MustExec(t, base.direct(t, db, ""), "CREATE FUNCTION lp_rc() RETURNS BIGINT NOT DETERMINISTIC NO SQL RETURN ROW_COUNT()")
	rdb, prefix := testRedis(t)
	cb := &comboBed{db: db, multiplex: multiplex, rdb: rdb, prefix: prefix,
		stmtText: "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1 AND stock >= 1",
		stmtPrep: "UPDATE sku_stock SET stock = stock - ? WHERE sku_id = ? AND stock >= ?"}
	for i := range cb.p {
		cb.p[i] = observedProxy(t, observed{edit: comboRules(db, locking, multiplex, marker...), log: zap.NewNop(),
			locker: func(t *testing.T, m *lockmgr.Metrics, log *zap.Logger) lockmgr.Locker {
				return redislock.New(rdb, &redislock.Options{TTL: comboTTL, Prefix: prefix, Logger: log, Metrics: m,
					LocalHandoffs: rules.DefaultLocalHandoffs, LocalHandoffWindow: rules.DefaultLocalHandoffWindow})
			}})
	}
	return cb
}

// comboClient is one buyer: a raw connection that sends the sale's
// UPDATE as text or as a prepared execute and returns the answer packet.
type comboClient struct {
	c      *client.Conn
	stmtID uint32
}

func (cb *comboBed) dial(t *testing.T, addr string, prepared bool, caps ...uint32) *comboClient {
	t.Helper()
	opt := func(c *client.Conn) error {
		c.UnsetCapability(mysql.CLIENT_QUERY_ATTRIBUTES)
		c.UnsetCapability(mysql.CLIENT_DEPRECATE_EOF)
		for _, f := range caps {
			if err := c.SetCapability(f); err != nil {
				return err
			}
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bed := testbedFor(t)
	c, err := client.ConnectWithDialer(ctx, "tcp", addr, bed.User, bed.Password, cb.db, (&net.Dialer{}).DialContext, opt)
	if err != nil {
		t.Fatalf("connect %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	cc := &comboClient{c: c}
	if prepared {
		p, err := cc.do(append([]byte{mysql.COM_STMT_PREPARE}, cb.stmtPrep...))
		if err != nil || p[0] != mysql.OK_HEADER {
			t.Fatalf("prepare: %v %x", err, p)
		}
		cc.stmtID = binary.LittleEndian.Uint32(p[1:])
		for range 3 + 1 { // three parameter definitions and their EOF
			if _, err := cc.readPacket(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return cc
}

func (cc *comboClient) readPacket() ([]byte, error) {
	_ = cc.c.SetReadDeadline(time.Now().Add(60 * time.Second))
	return cc.c.ReadPacket()
}

// do sends one command and returns the first packet of its answer.
func (cc *comboClient) do(payload []byte) ([]byte, error) {
	cc.c.ResetSequence()
	if err := cc.c.WritePacket(append(make([]byte, 4), payload...)); err != nil {
		return nil, err
	}
	return cc.readPacket()
}

// buy sends the sale's UPDATE of row key and returns its answer packet.
func (cc *comboClient) buy(cb *comboBed, key int64) ([]byte, error) {
	if cc.stmtID == 0 {
		return cc.do(fmt.Appendf([]byte{mysql.COM_QUERY}, "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = %d AND stock >= 1", key))
	}
	b := binary.LittleEndian.AppendUint32([]byte{mysql.COM_STMT_EXECUTE}, cc.stmtID)
	b = binary.LittleEndian.AppendUint32(append(b, 0), 1)
	b = append(b, 0, 1, mysql.MYSQL_TYPE_LONGLONG, 0, mysql.MYSQL_TYPE_LONGLONG, 0, mysql.MYSQL_TYPE_LONGLONG, 0)
	for _, v := range []int64{1, key, 1} {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return cc.do(b)
}

// errRowCountGone is lockproxy's refusal of ROW_COUNT() under
// multiplexing when the statement before it ran alone on a connection the
// session gave back (1105: see pool_pins.go).
var errRowCountGone = errors.New("ROW_COUNT() refused: the previous statement's connection was given back")

// rowCount asks the session's ROW_COUNT() (a text query's one value),
// itself or through a stored function (viaFunction).
func (cc *comboClient) rowCount(viaFunction bool) (string, error) {
	q := "SELECT ROW_COUNT()"
	if viaFunction {
		q = "SELECT lp_rc()"
	}
	p, err := cc.do(append([]byte{mysql.COM_QUERY}, q...))
	if err != nil {
		return "", err
	}
	if p[0] == mysql.ERR_HEADER {
		if len(p) > 9 && binary.LittleEndian.Uint16(p[1:]) == 1105 && bytes.HasPrefix(p[9:], []byte("lockproxy: ")) &&
			bytes.Contains(p, []byte("reads what the previous statement left")) {
			return "", errRowCountGone
		}
		return "", fmt.Errorf("ROW_COUNT(): %x", p)
	}
	var val string
	for i := 0; ; i++ {
		p, err := cc.readPacket()
		if err != nil {
			return "", err
		}
		if p[0] == mysql.EOF_HEADER && len(p) < 9 {
			if i > 1 {
				return val, nil
			}
			continue
		}
		if i == 2 { // column, EOF, row
			v, _, _, _ := mysql.LengthEncodedString(p)
			val = string(v)
		}
	}
}

// oracleAnswers are MariaDB's own answers to the sale's UPDATE, asked
// directly with the same capabilities: one that bought, one that found
// no stock.
func (cb *comboBed) oracleAnswers(t *testing.T, prepared bool, caps ...uint32) (bought, none []byte) {
	t.Helper()
	testbed.MustExec(t, cb.p[0].direct(t, cb.db, ""), "REPLACE INTO sku_stock VALUES (2, 1)")
	d := cb.dial(t, testbedFor(t).PrimaryAddr, prepared, caps...)
	var err error
	if bought, err = d.buy(cb, 2); err != nil {
		t.Fatal(err)
	}
	if none, err = d.buy(cb, 2); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(bought, none) || bought[0] != mysql.OK_HEADER || none[0] != mysql.OK_HEADER {
		t.Fatalf("MariaDB's answers: %x and %x", bought, none)
	}
	return bought, none
}

// saleTally is what the buyers saw.
type saleTally struct {
	bought, lost, wrongAnswers, wrongCounts atomic.Int64
	// refused counts ROW_COUNT() refused under multiplexing after a
	// statement that ran alone (errRowCountGone).
	refused    atomic.Int64
	mu         sync.Mutex
	firstWrong string
}

func (s *saleTally) wrong(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.firstWrong == "" {
		s.firstWrong = fmt.Sprintf(format, args...)
	}
}

// runComboSale sells stock units of row 1 to clients buyers spread over
// the two instances, each buying until MariaDB-exact "no stock" answer;
// every answer must be MariaDB's own bytes, and ROW_COUNT() after it,
// asked directly or by a stored function, what MariaDB says after it. A
// buyer whose connection closes stops (lost).
func (cb *comboBed) runComboSale(t *testing.T, clients, stock int, prepared bool, caps ...uint32) *saleTally {
	t.Helper()
	bought, none := cb.oracleAnswers(t, prepared, caps...)
	testbed.MustExec(t, cb.p[0].direct(t, cb.db, ""), fmt.Sprintf("REPLACE INTO sku_stock VALUES (1, %d)", stock))
	buyers := make([]*comboClient, clients)
	for i := range buyers {
		buyers[i] = cb.dial(t, cb.p[i%2].addr, prepared, caps...)
	}
	var tally saleTally
	var wg sync.WaitGroup
	for i, b := range buyers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				p, err := b.buy(cb, 1)
				if err != nil {
					tally.lost.Add(1)
					return
				}
				want := "1"
				switch {
				case bytes.Equal(p, bought):
					tally.bought.Add(1)
				case bytes.Equal(p, none):
					want = "0"
				default:
					tally.wrongAnswers.Add(1)
					tally.wrong("buyer %d: answer %x, MariaDB answers %x or %x", i, p, bought, none)
					return
				}
				if n%7 == 0 || want == "0" {
					got, err := b.rowCount(n%2 == 1)
					switch {
					case errors.Is(err, errRowCountGone) && cb.multiplex:
						tally.refused.Add(1)
					case err != nil:
						tally.lost.Add(1)
						return
					case got != want:
						tally.wrongCounts.Add(1)
						tally.wrong("buyer %d: ROW_COUNT() %s after answer %x, want %s", i, got, p, want)
					}
				}
				if want == "0" {
					return
				}
			}
		}()
	}
	wg.Wait()
	return &tally
}

func (cb *comboBed) stock(t *testing.T) int64 {
	t.Helper()
	var v int64
	if err := cb.p[0].direct(t, cb.db, "").QueryRow("SELECT stock FROM sku_stock WHERE sku_id = 1").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func (cb *comboBed) combined(t *testing.T) float64 {
	return value(t, cb.p[0].reg, "lockproxy_combined_statements_total", "rule=sku") +
		value(t, cb.p[1].reg, "lockproxy_combined_statements_total", "rule=sku")
}

// TestCombineSale sells 5,000 units of one row to 64 clients through two
// instances, text and prepared, under a locking and an optimistic rule:
// exactly 5,000 buy, the stock ends at 0 (a CHECK keeps it from going
// below), every answer is byte for byte MariaDB's, and ROW_COUNT()
// answers as after the client's own statement (multiplexed, where the
// statement ran alone on a connection given back since, lockproxy
// refuses it: errRowCountGone), with connections pinned to sessions and
// multiplexed.
func TestCombineSale(t *testing.T) {
	for _, mode := range []string{"pinned", "multiplexed"} {
		for _, locking := range []bool{true, false} {
			for _, prepared := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/locking=%v/prepared=%v", mode, locking, prepared), func(t *testing.T) {
					combineSale(t, locking, prepared, mode == "multiplexed")
				})
			}
		}
	}
}

func combineSale(t *testing.T, locking, prepared, multiplex bool) {
	cb := startComboBedMux(t, locking, multiplex)
	const stock = 5000
	tally := cb.runComboSale(t, 64, stock, prepared)
	if tally.firstWrong != "" {
		t.Errorf("%d wrong answers, %d wrong ROW_COUNT(): first: %s", tally.wrongAnswers.Load(), tally.wrongCounts.Load(), tally.firstWrong)
	}
	if got := tally.bought.Load(); got != stock || tally.lost.Load() != 0 {
		t.Errorf("%d bought, %d connections lost; want %d bought, none lost", got, tally.lost.Load(), stock)
	}
	if final := cb.stock(t); final != 0 {
		t.Errorf("final stock %d, want 0", final)
	}
	if cb.combined(t) == 0 {
		t.Errorf("no statement was combined")
	}
	if handed := value(t, cb.p[0].reg, "lockproxy_lock_local_handoffs_total", "rule=sku") +
		value(t, cb.p[1].reg, "lockproxy_lock_local_handoffs_total", "rule=sku"); locking && handed == 0 {
		t.Errorf("the row's lease never passed from one batch to the next inside an instance")
	}
	t.Logf("combined %v of %d statements; ROW_COUNT() refused %d times", cb.combined(t), stock, tally.refused.Load())
}

// TestCombineFoundRows: a client with CLIENT_FOUND_ROWS and
// CLIENT_SESSION_TRACK gets MariaDB's answers for those flags.
func TestCombineFoundRows(t *testing.T) {
	cb := startComboBed(t, false)
	tally := cb.runComboSale(t, 16, 800, false, mysql.CLIENT_FOUND_ROWS, mysql.CLIENT_SESSION_TRACK)
	if tally.firstWrong != "" || tally.bought.Load() != 800 || tally.lost.Load() != 0 {
		t.Errorf("bought %d lost %d; first wrong: %s", tally.bought.Load(), tally.lost.Load(), tally.firstWrong)
	}
	if final := cb.stock(t); final != 0 {
		t.Errorf("final stock %d, want 0", final)
	}
}

// TestCombineWarnings: after a combined statement, the session's
// warnings are the sale's (none), as MariaDB answers SHOW WARNINGS after
// the UPDATE, not those of the statement its connection ran before (a
// statement naming no table leaves the previous warnings in place, so
// the statement sent ahead of the next command must name one). Each
// buyer makes a warning, buys, and reads SHOW WARNINGS, on connections
// pinned to sessions (under multiplexing the next statement may run on
// another connection; its diagnostics are pool_mux's).
func TestCombineWarnings(t *testing.T) {
	cb := startComboBedMux(t, false, false)
	testbed.MustExec(t, cb.p[0].direct(t, cb.db, ""), "REPLACE INTO sku_stock VALUES (1, 1000000)")
	const buyers, rounds = 16, 40
	var wrong, done atomic.Int64
	var first sync.Once
	var firstWrong string
	var wg sync.WaitGroup
	for i := range buyers {
		b := cb.dial(t, cb.p[i%2].addr, false)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if r, err := b.c.Execute("SELECT CAST('1x' AS SIGNED)"); err != nil || r.Warnings != 1 {
					t.Errorf("buyer %d: the statement making a warning: %v, %d warnings", i, err, r.Warnings)
					return
				}
				if p, err := b.buy(cb, 1); err != nil || p[0] != mysql.OK_HEADER {
					t.Errorf("buyer %d: buy: %v %x", i, err, p)
					return
				}
				r, err := b.c.Execute("SHOW WARNINGS")
				if err != nil {
					t.Errorf("buyer %d: SHOW WARNINGS: %v", i, err)
					return
				}
				if n := len(r.Values); n != 0 {
					wrong.Add(1)
					first.Do(func() {
						firstWrong = fmt.Sprintf("buyer %d: SHOW WARNINGS after the sale has %d rows: %v", i, n, r.Values)
					})
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	if wrong.Load() != 0 {
		t.Errorf("%d of %d SHOW WARNINGS after a sale showed an earlier statement's warnings; first: %s", wrong.Load(), done.Load(), firstWrong)
	}
	if cb.combined(t) == 0 {
		t.Errorf("no statement was combined")
	}
	t.Logf("combined %v of %d sales", cb.combined(t), done.Load())
}

// TestCombineFaults breaks the first batch of two or more on instance 0:
// its backend connection dies before COMMIT (its members run alone, the
// leader's client loses its connection, nothing of it is applied) or
// once COMMIT was sent (every member's client loses its connection and
// lockproxy learns whether it committed: from the batch's marker under a
// locking and an optimistic rule, from the row under a locking rule
// without marker); or the batch's lease is lost before COMMIT (its
// members run alone). In each case no unit is sold twice or lost: the
// stock left is the stock less what clients were told they bought, less,
// when the lost batch committed, its members.
func TestCombineFaults(t *testing.T) {
	for _, tc := range []struct {
		fault   string
		locking bool
		marker  []string
	}{
		{"before commit", true, nil},
		{"commit sent", true, nil},
		{"lease lost", true, nil},
		{"before commit", false, nil},
		{"commit sent", false, nil},
		{"commit sent", true, []string{rules.CombineMarkerNone}},
		{"killed", false, nil},
	} {
		for _, multiplex := range []bool{false, true} {
			combineFault(t, tc.fault, tc.locking, multiplex, tc.marker)
		}
	}
}

func combineFault(t *testing.T, fault string, locking, multiplex bool, marker []string) {
	name := fmt.Sprintf("%s/locking=%v", fault, locking)
	if marker != nil {
		name += "/no marker"
	}
	if multiplex {
		name += "/multiplexed"
	}
	t.Run(name, func(t *testing.T) {
		cb := startComboBedMux(t, locking, multiplex, marker...)
		var fired atomic.Bool
		stage := fault
		if fault == "lease lost" || fault == "killed" {
			stage = "before commit"
		}
		cb.p[0].srv.combine.setHook(func(at string, b *backendConn) error {
			if at != stage || !fired.CompareAndSwap(false, true) {
				return nil
			}
			switch fault {
			case "lease lost":
				cb.takeOverLock(t)
				return nil
			case "killed": // the server ends the batch's thread: the UPDATE and COMMIT go to a dead connection
				if _, err := cb.p[0].direct(t, cb.db, "").Exec(fmt.Sprintf("KILL CONNECTION %d", b.threadID)); err != nil {
					t.Error(err)
				}
				return nil
			}
			_ = b.nc.Close()
			b.broken = true
			return fmt.Errorf("the test closed the connection %s", at)
		})
		const stock = 3000
		tally := cb.runComboSale(t, 32, stock, false)
		if !fired.Load() {
			t.Fatal("no batch of two or more ran on instance 0")
		}
		if tally.firstWrong != "" {
			t.Errorf("first wrong: %s", tally.firstWrong)
		}
		final := cb.stock(t)
		bought, lost := tally.bought.Load(), tally.lost.Load()
		applied := int64(0)
		switch fault {
		case "before commit":
			if lost != 1 {
				t.Errorf("%d clients lost their connection, want the leader's alone", lost)
			}
		case "commit sent":
			committed := value(t, cb.p[0].reg, "lockproxy_combine_commit_unknown_total", "outcome=committed,rule=sku")
			rolled := value(t, cb.p[0].reg, "lockproxy_combine_commit_unknown_total", "outcome=rolled_back,rule=sku")
			if committed+rolled != 1 || lost < 2 {
				t.Fatalf("outcome committed %v rolled back %v, %d connections lost: want one learnt outcome, its members' connections closed", committed, rolled, lost)
			}
			var marks int
			err := cb.p[0].direct(t, cb.db, "").QueryRow("SELECT COUNT(*) FROM lockproxy_combine").Scan(&marks)
			switch {
			case marker == nil && (err != nil || marks == 0):
				t.Errorf("the batches wrote no marker: %d rows, %v", marks, err)
			case marker != nil && err == nil:
				t.Errorf("marker_table: none, yet a marker table exists with %d rows", marks)
			}
			if committed == 1 {
				applied = lost
			}
		case "killed":
			// Either lockproxy saw the connection die before COMMIT
			// went out (the leader's client alone loses its
			// connection), or COMMIT went out and the marker says the
			// batch rolled back.
			committed := value(t, cb.p[0].reg, "lockproxy_combine_commit_unknown_total", "outcome=committed,rule=sku")
			rolled := value(t, cb.p[0].reg, "lockproxy_combine_commit_unknown_total", "outcome=rolled_back,rule=sku")
			if committed != 0 || rolled == 0 && lost != 1 {
				t.Errorf("outcome committed %v rolled back %v, %d connections lost: want the killed batch rolled back", committed, rolled, lost)
			}
			t.Logf("killed: outcomes %v", values(t, cb.p[0].reg, "lockproxy_combine_commit_unknown_total"))
		case "lease lost":
			if lost != 0 {
				t.Errorf("%d clients lost their connection, want none", lost)
			}
			if v := value(t, cb.p[0].reg, "lockproxy_lock_lease_lost_total", "rule=sku"); v < 1 {
				t.Errorf("lease lost %v times", v)
			}
		}
		if bought+applied+final != stock {
			t.Errorf("books: %d bought + %d applied in the lost batch + %d left != %d", bought, applied, final, stock)
		}
		t.Logf("%s: bought %d, lost connections %d, left %d", fault, bought, lost, final)
	})
}

// takeOverLock gives the row's lock in Redis to another holder and waits
// until instance 0 has found its lease lost.
func (cb *comboBed) takeOverLock(t *testing.T) {
	ctx := context.Background()
	keys, err := cb.rdb.Keys(ctx, cb.prefix+"*").Result()
	if err != nil {
		t.Error(err)
		return
	}
	for _, k := range keys {
		if strings.HasSuffix(k, ":fence") {
			continue
		}
		switch typ, _ := cb.rdb.Type(ctx, k).Result(); typ {
		case "hash":
			if tok, _ := cb.rdb.HGet(ctx, k, "tok").Result(); tok != "" {
				_ = redislocktest.TakeOver(ctx, cb.rdb, k)
			}
		case "string":
			_ = redislocktest.TakeOver(ctx, cb.rdb, k)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for value(t, cb.p[0].reg, "lockproxy_lock_lease_lost_total", "rule=sku") < 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCombineExplain: explain says which UPDATEs of a combining rule's
// table run combined, and why the others do not.
func TestCombineExplain(t *testing.T) {
	cfg := &rules.Config{}
	comboRules("shop", true, false)(cfg)
	rs, err := rules.Compile(cfg, rules.Schema{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		sql   string
		inTxn bool
		want  string
	}{
		{"UPDATE sku_stock SET stock = stock - 2 WHERE sku_id = 7 AND stock >= 2", false, "yes, in a batch when others of its row are in flight on the instance (floor stock >= 2)"},
		{"UPDATE sku_stock SET stock = stock + 5 WHERE sku_id = 7", false, "yes, in a batch when others of its row are in flight on the instance (no floor)"},
		{"UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 7 AND stock >= 1", true, "no (in a transaction or autocommit off)"},
		{"UPDATE sku_stock SET stock = stock - 1, note = 'x' WHERE sku_id = 7", false, "no (" + parser.CombineAssignments + ")"},
		{"UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 7 LIMIT 1", false, "no (" + parser.CombineModifiers + ")"},
		{"UPDATE sku_stock SET stock = stock - 1 WHERE sku_id IN (7, 8)", false, "no (not one row)"},
		{"SELECT stock FROM sku_stock WHERE sku_id = 7", false, ""},
	}
	for _, tc := range tests {
		e, err := Explain(rs, tc.sql, "shop", tc.inTxn, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(e.Combined, tc.want) || (tc.want == "") != (e.Combined == "") {
			t.Errorf("%s (in txn %v): combined %q, want %q", tc.sql, tc.inTxn, e.Combined, tc.want)
		}
	}
}

// TestCombineNotCombined: what combining must leave alone runs as it
// would without it, answered by MariaDB itself: an UPDATE in a
// transaction, one with a second assignment, and a session after LOCK
// TABLES; none of them is counted as combined.
func TestCombineNotCombined(t *testing.T) {
	cb := startComboBed(t, false)
	testbed.MustExec(t, cb.p[0].direct(t, cb.db, ""), "ALTER TABLE sku_stock ADD COLUMN note VARCHAR(10) NOT NULL DEFAULT ''",
		"REPLACE INTO sku_stock (sku_id, stock) VALUES (1, 100)")
	db := cb.p[0].db(t, cb.db, "")
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := db.Conn(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			stmts := map[int][]string{
				0: {"BEGIN", "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1 AND stock >= 1", "COMMIT"},
				1: {"UPDATE sku_stock SET stock = stock - 1, note = 'x' WHERE sku_id = 1 AND stock >= 1"},
				2: {"LOCK TABLES sku_stock WRITE", "UNLOCK TABLES", "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1 AND stock >= 1"},
			}[i%3]
			for range 5 {
				for _, q := range stmts {
					if _, err := c.ExecContext(ctx, q); err != nil {
						t.Errorf("%s: %v", q, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if n := cb.combined(t); n != 0 {
		t.Errorf("%v statements combined, want none", n)
	}
	if final := cb.stock(t); final != 100-16*5 {
		t.Errorf("stock %d, want %d", final, 100-16*5)
	}
}
