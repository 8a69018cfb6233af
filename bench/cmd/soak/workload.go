package main

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/lockproxy/lockproxy/bench/internal/contend"
	"github.com/lockproxy/lockproxy/bench/internal/env"
)

// Schema and workload shape.
const (
	database     = "bench_soak"
	hotSKUs      = 4    // skus 1..4: the flash sale
	abandonSKU   = 100  // the row abandoned transactions write to; never sold
	initialStock = 200  // per hot sku at the start; refilled when sold out
	restockQty   = 200  // units a refill adds
	abandonStock = 1000 // stock of abandonSKU; an abandoned write must not change it
	counterKeys  = 4    // rows of the rewrite table
	catalogRows  = 4000 // the table read in full now and then

	buyersPerInstance   = 4
	readersPerInstance  = 2
	countersPerInstance = 2
	bigPerInstance      = 1
	// plus one connection churner and one abandoner spread over both
	// instances: 2*(4+2+2+1)+2 = 20 client goroutines.

	// buyerPause and the five below are the mean pause between two
	// operations of one client of each kind (each pause is drawn from ±50%
	// of it): the pacing that keeps the 20 clients from saturating a
	// 2-core host.
	buyerPause   = 60 * time.Millisecond
	readerPause  = 25 * time.Millisecond
	counterPause = 40 * time.Millisecond
	bigReadPause = 5 * time.Second
	churnPause   = time.Second
	abandonPause = 10 * time.Second

	opTimeout = 30 * time.Second // per statement group; never the stop signal
	// releaseBound is how soon a lock held by a client that disconnected
	// inside its transaction must be free again: well under the 10 s lease,
	// so a lock that merely expired fails the check.
	releaseBound = 5 * time.Second
)

// rulesYAML guards sku_stock by sku_id (writes, locking reads and reads in
// a transaction) and rewrites read-then-write UPDATEs of counters.n in delta
// mode, pairing a write with the read of its connection (scope: session:
// counter holds one connection per operation, in autocommit); orders,
// restocks and catalog are unguarded.
func rulesYAML() string {
	return contend.LockRule(database, "write, locking_read, read_in_txn") +
		"  - name: counters\n    table: " + database + ".counters\n    key: [id]\n    lock: []\n" +
		"    rewrite:\n      column: n\n      mode: delta\n      scope: session\n"
}

// setupSchema creates bench_soak on the primary and fills it; the returned
// pool is direct on the primary, for the checks.
func setupSchema(ctx context.Context, e *env.Env) (*sql.DB, error) {
	db, err := contend.Fresh(ctx, e, database)
	if err != nil {
		return nil, err
	}
	stmts := []string{
		"CREATE INDEX orders_sku ON orders (sku_id)",
		"CREATE TABLE restocks (id BIGINT AUTO_INCREMENT PRIMARY KEY, sku_id BIGINT NOT NULL, qty BIGINT NOT NULL) ENGINE=InnoDB",
		"CREATE TABLE counters (id BIGINT PRIMARY KEY, n BIGINT NOT NULL) ENGINE=InnoDB",
		"CREATE TABLE catalog (id BIGINT PRIMARY KEY, name VARCHAR(64) NOT NULL, price BIGINT NOT NULL, views BIGINT NOT NULL DEFAULT 0, pad VARCHAR(100) NOT NULL) ENGINE=InnoDB",
		fmt.Sprintf("INSERT INTO catalog (id, name, price, pad) SELECT seq, CONCAT('item-', seq), seq %% 997, REPEAT('x', 80) FROM seq_1_to_%d", catalogRows),
	}
	var vals []string
	for k := 1; k <= hotSKUs; k++ {
		vals = append(vals, fmt.Sprintf("(%d,%d)", k, initialStock))
	}
	vals = append(vals, fmt.Sprintf("(%d,%d)", abandonSKU, abandonStock))
	stmts = append(stmts, "INSERT INTO sku_stock (sku_id, stock) VALUES "+strings.Join(vals, ","))
	vals = vals[:0]
	for k := 1; k <= counterKeys; k++ {
		vals = append(vals, fmt.Sprintf("(%d,0)", k))
	}
	stmts = append(stmts, "INSERT INTO counters (id, n) VALUES "+strings.Join(vals, ","))
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("soak: schema: %s: %w", s, err)
		}
	}
	return db, nil
}

// primeStatements is how many distinct text statements prime warms each
// instance with: more than the 10,000 statement analyses lockproxy caches
// (an LRU), so its cache is full before the start snapshot and its
// filling up does not show as growth.
const primeStatements = 12000

// prime fills each instance's statement cache with primeStatements
// distinct texts of the shape the workload sends without bound (the
// rewrite table's UPDATE n = <value>), on a row that does not exist so
// nothing changes.
func prime(ctx context.Context, bed *env.Bed, addrs []string, t *tally) error {
	const conns = 4
	for _, a := range addrs {
		p, err := sql.Open("mysql", bed.DSN(a, database))
		if err != nil {
			return fmt.Errorf("soak: prime %s: %w", a, err)
		}
		p.SetMaxOpenConns(conns)
		var wg sync.WaitGroup
		errs := make(chan error, conns)
		for c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := c; i < primeStatements; i += conns {
					q := fmt.Sprintf("UPDATE counters SET n = %d WHERE id = 0", 1_000_000+i)
					if _, err := p.ExecContext(ctx, q); err != nil {
						errs <- fmt.Errorf("soak: prime %s: %w", a, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		_ = p.Close()
		close(errs)
		if err := <-errs; err != nil {
			return err
		}
		t.add("cache primer: UPDATE counters SET n = <v> WHERE id = 0 (no row), text", primeStatements)
	}
	return nil
}

// tally counts what the clients did. Safe for concurrent use.
type tally struct {
	mu       sync.Mutex
	stmts    map[string]int64  // successful statements (or operations) by kind
	errs     map[string]int64  // errors by code
	firstMsg map[string]string // the first message seen per error code
	// Increments of the rewrite table the clients saw succeed (1 row
	// changed); the table's total must equal it.
	increments atomic.Int64
	// Releases slower than releaseBound (or never) after an abandoned
	// transaction, and the slowest one seen.
	slowReleases atomic.Int64
	maxRelease   atomic.Int64 // nanoseconds
}

func newTally() *tally {
	return &tally{stmts: map[string]int64{}, errs: map[string]int64{}, firstMsg: map[string]string{}}
}

// add counts n successful statements of kind.
func (t *tally) add(kind string, n int64) {
	t.mu.Lock()
	t.stmts[kind] += n
	t.mu.Unlock()
}

// fail counts err by its code.
func (t *tally) fail(err error) {
	code := errCode(err)
	t.mu.Lock()
	t.errs[code]++
	if _, ok := t.firstMsg[code]; !ok {
		t.firstMsg[code] = err.Error()
	}
	t.mu.Unlock()
}

// snapshot returns copies of the counts.
func (t *tally) snapshot() (stmts, errs map[string]int64, msgs map[string]string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	stmts, errs, msgs = map[string]int64{}, map[string]int64{}, map[string]string{}
	for k, v := range t.stmts {
		stmts[k] = v
	}
	for k, v := range t.errs {
		errs[k] = v
	}
	for k, v := range t.firstMsg {
		msgs[k] = v
	}
	return stmts, errs, msgs
}

// expectedErrors are the codes a client is told to retry under contention:
// lock wait timeout and deadlock (lockproxy's or InnoDB's).
var expectedErrors = map[string]bool{"1205": true, "1213": true}

// errCode names an error for counting: the MySQL error number, or a short
// class for driver and network failures.
func errCode(err error) string {
	var me *mysql.MySQLError
	var ne net.Error
	switch {
	case errors.As(err, &me):
		return strconv.Itoa(int(me.Number))
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, mysql.ErrInvalidConn):
		return "bad-connection"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &ne):
		return "network"
	case errors.Is(err, errCheck):
		return "check"
	default:
		return "other"
	}
}

// errCheck marks a wrong answer: a short result, a login that should have
// failed, a value that cannot be.
var errCheck = errors.New("soak: wrong answer")

// unexpected sums the errors whose codes are not expected.
func unexpected(errs map[string]int64) int64 {
	var n int64
	for code, c := range errs {
		if !expectedErrors[code] {
			n += c
		}
	}
	return n
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// workload runs the mixed clients against the instances until stopped.
type workload struct {
	bed   *env.Bed
	addrs []string // lockproxy instances
	t     *tally

	pools []*sql.DB // one shared pool per instance
	stop  chan struct{}
	wg    sync.WaitGroup
}

// startWorkload opens one pool per instance and starts every client.
func startWorkload(ctx context.Context, bed *env.Bed, addrs []string, t *tally) (*workload, error) {
	w := &workload{bed: bed, addrs: addrs, t: t, stop: make(chan struct{})}
	perInstance := buyersPerInstance + readersPerInstance + countersPerInstance + bigPerInstance + 2
	for _, a := range addrs {
		p, err := sql.Open("mysql", bed.DSN(a, database))
		if err != nil {
			w.closePools()
			return nil, fmt.Errorf("soak: open %s: %w", a, err)
		}
		p.SetMaxOpenConns(perInstance)
		p.SetMaxIdleConns(perInstance)
		p.SetConnMaxLifetime(2 * time.Minute) // sessions come and go inside the pools too
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = p.PingContext(pctx)
		cancel()
		if err != nil {
			_ = p.Close()
			w.closePools()
			return nil, fmt.Errorf("soak: ping %s: %w", a, err)
		}
		w.pools = append(w.pools, p)
	}
	client := 0
	for i := range addrs {
		for range buyersPerInstance {
			w.loop(client, buyerPause, w.buyer(i, client))
			client++
		}
		for range readersPerInstance {
			st, err := w.pools[i].PrepareContext(ctx, "SELECT id, name, price FROM catalog WHERE id = ?")
			if err != nil {
				w.halt()
				return nil, fmt.Errorf("soak: prepare: %w", err)
			}
			w.loop(client, readerPause, w.reader(i, st))
			client++
		}
		for range countersPerInstance {
			w.loop(client, counterPause, w.counter(i))
			client++
		}
		for range bigPerInstance {
			w.loop(client, bigReadPause, w.bigRead(i))
			client++
		}
	}
	w.loop(client, churnPause, w.churn())
	client++
	w.loop(client, abandonPause, w.abandoner())
	return w, nil
}

// op is one iteration of a client; it counts its own successes and returns
// the error, if any, for counting.
type op func(ctx context.Context, rng *rand.Rand) error

// loop runs f every pause (with ±50% jitter) until the workload stops.
// Statements run under their own timeout, never under the stop signal, so
// stopping never cuts a statement short and leaves its outcome unknown.
func (w *workload) loop(client int, pause time.Duration, f op) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		rng := rand.New(rand.NewPCG(uint64(client), uint64(time.Now().UnixNano())))
		for {
			d := pause/2 + time.Duration(rng.Int64N(int64(pause)+1))
			select {
			case <-w.stop:
				return
			case <-time.After(d):
			}
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			if err := f(ctx, rng); err != nil {
				w.t.fail(err)
			}
			cancel()
		}
	}()
}

// halt stops the clients, waits for them and closes the pools.
func (w *workload) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.wg.Wait()
	w.closePools()
}

func (w *workload) closePools() {
	for _, p := range w.pools {
		_ = p.Close()
	}
	w.pools = nil
}

// buyer is the flash-sale transaction on a random hot sku: BEGIN; SELECT
// stock [FOR UPDATE]; UPDATE stock = <read - 1>; INSERT order; COMMIT, or
// when sold out a refill (UPDATE stock = <read + restockQty>; INSERT
// restock). Half the reads are plain SELECTs in the transaction, which only
// the read_in_txn lock makes safe; half the statements are prepared.
func (w *workload) buyer(inst, client int) op {
	return func(ctx context.Context, rng *rand.Rand) (err error) {
		k := int64(1 + rng.IntN(hotSKUs))
		prepared, forUpdate := rng.IntN(2) == 0, rng.IntN(2) == 0
		proto := protoName(prepared)
		tx, err := w.pools[inst].BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() {
			if err != nil {
				_ = tx.Rollback()
			}
		}()
		q, args := stmt(prepared, "SELECT stock FROM sku_stock WHERE sku_id = %d", k)
		kind := "txn SELECT stock (read_in_txn)"
		if forUpdate {
			q += " FOR UPDATE"
			kind = "txn SELECT stock FOR UPDATE"
		}
		var stock int64
		if err = tx.QueryRowContext(ctx, q, args...).Scan(&stock); err != nil {
			return err
		}
		w.t.add(kind+", "+proto, 1)
		if stock < 0 {
			return fmt.Errorf("%w: sku %d stock %d", errCheck, k, stock)
		}
		if stock > 0 {
			if err = execTx(ctx, tx, prepared, "UPDATE sku_stock SET stock = %d WHERE sku_id = %d", stock-1, k); err != nil {
				return err
			}
			if err = execTx(ctx, tx, prepared, "INSERT INTO orders (sku_id, buyer) VALUES (%d, %d)", k, int64(client)); err != nil {
				return err
			}
			if err = tx.Commit(); err != nil {
				return err
			}
			w.t.add("txn UPDATE stock + INSERT order + COMMIT (a sale), "+proto, 1)
			return nil
		}
		if err = execTx(ctx, tx, prepared, "UPDATE sku_stock SET stock = %d WHERE sku_id = %d", stock+restockQty, k); err != nil {
			return err
		}
		if err = execTx(ctx, tx, prepared, "INSERT INTO restocks (sku_id, qty) VALUES (%d, %d)", k, restockQty); err != nil {
			return err
		}
		if err = tx.Commit(); err != nil {
			return err
		}
		w.t.add("txn UPDATE stock + INSERT restock + COMMIT (sold out, refill), "+proto, 1)
		return nil
	}
}

// reader sends autocommit reads (routed to the replica): a point read of a
// guarded row as text, a long-lived prepared statement on the catalog, a
// per-call prepared range read; and now and then an unguarded autocommit
// write.
func (w *workload) reader(inst int, st *sql.Stmt) op {
	return func(ctx context.Context, rng *rand.Rand) error {
		p := w.pools[inst]
		switch r := rng.IntN(20); {
		case r < 8:
			var stock int64
			q := fmt.Sprintf("SELECT stock FROM sku_stock WHERE sku_id = %d", 1+rng.IntN(hotSKUs))
			if err := p.QueryRowContext(ctx, q).Scan(&stock); err != nil {
				return err
			}
			w.t.add("autocommit SELECT sku_stock, text", 1)
		case r < 15:
			var id, price int64
			var name string
			if err := st.QueryRowContext(ctx, 1+rng.IntN(catalogRows)).Scan(&id, &name, &price); err != nil {
				return err
			}
			w.t.add("autocommit SELECT catalog, prepared (long-lived stmt)", 1)
		case r < 19:
			lo := 1 + rng.IntN(catalogRows-20)
			rows, err := p.QueryContext(ctx, "SELECT id, name, price FROM catalog WHERE id BETWEEN ? AND ?", lo, lo+19)
			if err != nil {
				return err
			}
			n, err := drain(rows, 3)
			if err != nil {
				return err
			}
			if n != 20 {
				return fmt.Errorf("%w: range read got %d rows, want 20", errCheck, n)
			}
			w.t.add("autocommit SELECT catalog range, prepared (per call)", 1)
		default:
			q := fmt.Sprintf("UPDATE catalog SET views = views + 1 WHERE id = %d", 1+rng.IntN(catalogRows))
			if _, err := p.ExecContext(ctx, q); err != nil {
				return err
			}
			w.t.add("autocommit UPDATE catalog (unguarded), text", 1)
		}
		return nil
	}
}

// counter is the read-then-write on one connection that the rewrite rule
// makes safe: SELECT n; UPDATE SET n = <read + 1>. An UPDATE that changed
// the row is an increment the table must show.
func (w *workload) counter(inst int) op {
	return func(ctx context.Context, rng *rand.Rand) error {
		k := int64(1 + rng.IntN(counterKeys))
		prepared := rng.IntN(2) == 0
		proto := protoName(prepared)
		c, err := w.pools[inst].Conn(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		var n int64
		q, a := stmt(prepared, "SELECT n FROM counters WHERE id = %d", k)
		if err := c.QueryRowContext(ctx, q, a...).Scan(&n); err != nil {
			return err
		}
		w.t.add("rewrite SELECT n, "+proto, 1)
		q, a = stmt(prepared, "UPDATE counters SET n = %d WHERE id = %d", n+1, k)
		res, err := c.ExecContext(ctx, q, a...)
		if err != nil {
			return err
		}
		if ra, _ := res.RowsAffected(); ra == 1 {
			w.t.increments.Add(1)
			w.t.add("rewrite UPDATE n = <read+1> (changed the row), "+proto, 1)
		} else {
			w.t.add("rewrite UPDATE n = <read+1> (0 rows: conflict), "+proto, 1)
		}
		return nil
	}
}

// bigRead reads the whole catalog (catalogRows rows) to the last row,
// alternately as text and prepared.
func (w *workload) bigRead(inst int) op {
	var flip atomic.Bool
	return func(ctx context.Context, _ *rand.Rand) error {
		prepared := flip.Load()
		flip.Store(!prepared)
		q, a := "SELECT * FROM catalog", []any(nil)
		if prepared {
			q, a = "SELECT * FROM catalog WHERE id > ?", []any{0}
		}
		rows, err := w.pools[inst].QueryContext(ctx, q, a...)
		if err != nil {
			return err
		}
		n, err := drain(rows, 5)
		if err != nil {
			return err
		}
		if n != catalogRows {
			return fmt.Errorf("%w: full read got %d rows, want %d", errCheck, n, catalogRows)
		}
		w.t.add("SELECT * FROM catalog ("+strconv.Itoa(catalogRows)+" rows), "+protoName(prepared), 1)
		return nil
	}
}

// churn opens a fresh connection, runs one query and closes it, alternating
// instances; every 20th login uses a wrong password and must get 1045.
func (w *workload) churn() op {
	var n atomic.Int64
	return func(ctx context.Context, _ *rand.Rand) error {
		i := n.Add(1)
		addr := w.addrs[int(i)%len(w.addrs)]
		bad := i%20 == 0
		if bad { // alternate the instances that see the wrong passwords too
			addr = w.addrs[int(i/20)%len(w.addrs)]
		}
		dsn := w.bed.DSN(addr, database)
		if bad {
			cfg, err := mysql.ParseDSN(dsn)
			if err != nil {
				return fmt.Errorf("soak: dsn: %w", err)
			}
			cfg.Passwd += "-wrong"
			dsn = cfg.FormatDSN()
		}
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			return fmt.Errorf("soak: open: %w", err)
		}
		defer db.Close()
		db.SetMaxOpenConns(1)
		var one int
		err = db.QueryRowContext(ctx, "SELECT 1").Scan(&one)
		if bad {
			var me *mysql.MySQLError
			if errors.As(err, &me) && me.Number == 1045 {
				w.t.add("login with a wrong password (refused with 1045)", 1)
				return nil
			}
			if err == nil {
				return fmt.Errorf("%w: login with a wrong password was accepted", errCheck)
			}
			return err
		}
		if err != nil {
			return err
		}
		w.t.add("fresh connection: connect, SELECT 1, close", 1)
		return nil
	}
}

// abandoner begins a transaction that takes a row's lock, then drops the
// connection without COMMIT (alternately an abrupt TCP close and a polite
// COM_QUIT); a transaction on the other instance must then get the row
// within releaseBound. Every other time the row is the dedicated abandonSKU
// and the abandoned transaction also decrements it, which must be rolled
// back; otherwise it is a hot sku, locked only.
func (w *workload) abandoner() op {
	var n atomic.Int64
	return func(ctx context.Context, _ *rand.Rand) error {
		i := n.Add(1)
		inst := int(i) % len(w.addrs)
		k, write := int64(abandonSKU), i%2 == 0
		if !write {
			k = 1 + i%hotSKUs
		}
		abrupt := i%4 < 2
		cfg, err := mysql.ParseDSN(w.bed.DSN(w.addrs[inst], database))
		if err != nil {
			return fmt.Errorf("soak: dsn: %w", err)
		}
		var raw net.Conn
		cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			raw = c
			return c, err
		}
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			return fmt.Errorf("soak: connector: %w", err)
		}
		db := sql.OpenDB(conn)
		defer db.Close()
		db.SetMaxOpenConns(1)
		c, err := db.Conn(ctx)
		if err != nil {
			return err
		}
		tx, err := c.BeginTx(ctx, nil)
		if err != nil {
			_ = c.Close()
			return err
		}
		var stock int64
		err = tx.QueryRowContext(ctx, "SELECT stock FROM sku_stock WHERE sku_id = ? FOR UPDATE", k).Scan(&stock)
		if err == nil && write {
			_, err = tx.ExecContext(ctx, "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = ?", k)
		}
		if err != nil {
			_ = tx.Rollback()
			_ = c.Close()
			return err
		}
		// Drop the connection with the transaction open.
		if abrupt {
			if tc, ok := raw.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // RST, as a crashed client
			}
			_ = raw.Close()
		} else {
			_ = c.Raw(func(dc any) error {
				if cl, ok := dc.(interface{ Close() error }); ok {
					return cl.Close() // COM_QUIT without COMMIT
				}
				return nil
			})
		}
		_ = tx.Rollback() // the driver's side only; the connection is gone
		_ = c.Close()
		how := "COM_QUIT"
		if abrupt {
			how = "TCP reset"
		}
		w.t.add("abandoned txn holding a row lock ("+how+")", 1)
		return w.checkRelease(ctx, (inst+1)%len(w.addrs), k)
	}
}

// checkRelease takes row k's lock in a transaction through instance inst
// and records how long it took.
func (w *workload) checkRelease(ctx context.Context, inst int, k int64) error {
	start := time.Now()
	var tx *sql.Tx
	var took time.Duration
	for {
		var err error
		if tx, err = w.pools[inst].BeginTx(ctx, nil); err != nil {
			return err
		}
		var stock int64
		err = tx.QueryRowContext(ctx, "SELECT stock FROM sku_stock WHERE sku_id = ? FOR UPDATE", k).Scan(&stock)
		took = time.Since(start)
		if err == nil {
			break
		}
		_ = tx.Rollback()
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1213 && took < releaseBound {
			w.t.fail(err) // a wound-wait victim: counted, and tried again
			continue
		}
		w.t.slowReleases.Add(1)
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if took > releaseBound {
		w.t.slowReleases.Add(1)
	}
	for {
		old := w.t.maxRelease.Load()
		if int64(took) <= old || w.t.maxRelease.CompareAndSwap(old, int64(took)) {
			break
		}
	}
	w.t.add("txn on the abandoned row through the other instance (got the lock)", 1)
	return nil
}

// drain reads rows to the end, scanning cols columns as raw bytes.
func drain(rows *sql.Rows, cols int) (int, error) {
	defer rows.Close()
	dest := make([]any, cols)
	for i := range dest {
		dest[i] = new(sql.RawBytes)
	}
	n := 0
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return n, err
		}
		n++
	}
	return n, rows.Err()
}

// protoName names the protocol of a statement.
func protoName(prepared bool) string {
	if prepared {
		return "prepared"
	}
	return "text"
}

// stmt renders format with its %d arguments as literal text, or with each
// %d as a placeholder bound to its argument (a server-side prepared
// statement: the DSN has interpolateParams=false).
func stmt(prepared bool, format string, args ...int64) (string, []any) {
	fa := make([]any, len(args))
	for i, v := range args {
		fa[i] = v
	}
	if !prepared {
		return fmt.Sprintf(format, fa...), nil
	}
	return strings.ReplaceAll(format, "%d", "?"), fa
}

// execTx runs one statement of format in tx.
func execTx(ctx context.Context, tx *sql.Tx, prepared bool, format string, args ...int64) error {
	q, a := stmt(prepared, format, args...)
	_, err := tx.ExecContext(ctx, q, a...)
	return err
}
