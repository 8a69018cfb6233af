package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
)

// The bank workload: accounts start at 1000; workers move money between
// two random accounts with plain SELECTs and absolute UPDATEs in one
// transaction (no FOR UPDATE: the read_in_txn rule is what must make it
// safe); auditors sum every balance inside a transaction and in autocommit
// (served by a replica where one is configured); a direct writer,
// bypassing lockproxy, bumps a column no transfer reads. After each run
// the history must show: the total unchanged, no balance below zero, and
// every sum an auditor saw equal to the total.

const bankAccounts, bankStart = 8, 1000

func bankRule(db string) string {
	return fmt.Sprintf(`rules:
  - name: bank
    table: %s.bank_acct
    key: [id]
    lock: [write, locking_read, read_in_txn]
    on_unkeyed: reject
`, db)
}

// bankResult is what one run of the workload did.
type bankResult struct {
	transfers, retries, audits int64
	belowMin                   int64 // transfers a rewrite's min refused (4025)
	total                      int
	negative                   int      // accounts below zero at the end
	badSums                    []string // auditors' sums other than the total, by auditor
	errors                     sync.Map // unexpected errors, by message
}

func (r *bankResult) String() string {
	var errs []string
	r.errors.Range(func(k, v any) bool { errs = append(errs, fmt.Sprintf("%dx %s", *v.(*int64), k)); return true })
	return fmt.Sprintf("total %d (want %d), %d transfers, %d retries, %d below min, %d audits, %d negative, %d sums other than the total %v, errors %v",
		r.total, bankAccounts*bankStart, r.transfers, r.retries, r.belowMin, r.audits, r.negative, len(r.badSums), r.badSums, errs)
}

// check fails t unless the run kept every invariant, got transfers
// through, and saw no error but 1205/1213 (retried) and 4025 (a rewrite's
// min refused the transfer).
func (r *bankResult) check(t *testing.T) {
	t.Helper()
	if r.total != bankAccounts*bankStart || r.negative != 0 || len(r.badSums) != 0 {
		t.Errorf("the bank drifted: %v", r)
	}
	if r.transfers == 0 {
		t.Errorf("no transfer got through: %v", r)
	}
	var unexpected int
	r.errors.Range(func(any, any) bool { unexpected++; return true })
	if unexpected != 0 {
		t.Errorf("workers saw errors other than 1205/1213/4025: %v", r)
	}
}

// bankDB creates database name with the accounts, directly on the primary.
func bankDB(t *testing.T, bed *testbed.Bed, name string) *sql.DB {
	t.Helper()
	direct := freshDB(t, bed, name)
	if _, err := direct.Exec("CREATE TABLE bank_acct (id INT PRIMARY KEY, bal INT NOT NULL, touched INT NOT NULL DEFAULT 0)"); err != nil {
		t.Fatal(err)
	}
	for i := range bankAccounts {
		if _, err := direct.Exec("INSERT INTO bank_acct (id, bal) VALUES (?, ?)", i, bankStart); err != nil {
			t.Fatal(err)
		}
	}
	return direct
}

func (r *bankResult) fail(err error) {
	v, _ := r.errors.LoadOrStore(err.Error(), new(int64))
	atomic.AddInt64(v.(*int64), 1)
}

// transfer moves up to 100 from one account to another, reading both
// balances with plain SELECTs (with FOR UPDATE when lock, the code that is
// correct without lockproxy) and writing absolute values back.
func transfer(ctx context.Context, db *sql.DB, from, to, amount int, prepared, lock bool) (err error) {
	suffix := ""
	if lock {
		suffix = " FOR UPDATE"
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	read := func(id int) (bal int, err error) {
		if prepared {
			err = tx.QueryRowContext(ctx, "SELECT bal FROM bank_acct WHERE id = ?"+suffix, id).Scan(&bal)
		} else {
			err = tx.QueryRowContext(ctx, fmt.Sprintf("SELECT bal FROM bank_acct WHERE id = %d", id)+suffix).Scan(&bal)
		}
		return bal, err
	}
	write := func(id, bal int) error {
		var err error
		if prepared {
			_, err = tx.ExecContext(ctx, "UPDATE bank_acct SET bal = ? WHERE id = ?", bal, id)
		} else {
			_, err = tx.ExecContext(ctx, fmt.Sprintf("UPDATE bank_acct SET bal = %d WHERE id = %d", bal, id))
		}
		return err
	}
	fb, err := read(from)
	if err != nil {
		return err
	}
	tb, err := read(to)
	if err != nil {
		return err
	}
	if fb < amount {
		return tx.Rollback()
	}
	if err := write(from, fb-amount); err != nil {
		return err
	}
	if err := write(to, tb+amount); err != nil {
		return err
	}
	return tx.Commit()
}

// runBank runs the workload for d over the handles (workers spread over
// them) and reads the history's outcome from the primary.
func runBank(t *testing.T, direct *sql.DB, via []*sql.DB, workers int, d time.Duration, prepared, lock, replica bool) *bankResult {
	t.Helper()
	// A transfer the last run's end cut off may still hold row locks on
	// the primary (its client gone, its statement or rollback still
	// running): the reset waits for it, and InnoDB may pick the reset as
	// a deadlock's victim (1213), as it may any transaction.
	testbed.EventuallyWhy(t, 30*time.Second, "reset the balances", func() (bool, string) {
		_, err := direct.Exec("UPDATE bank_acct SET bal = ?", bankStart)
		if err != nil && !retryable(err) {
			t.Fatal(err)
		}
		return err == nil, fmt.Sprint(err)
	})
	res := &bankResult{}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db := via[w%len(via)]
			rng := rand.New(rand.NewPCG(uint64(w), 38))
			for ctx.Err() == nil {
				from, to := rng.IntN(bankAccounts), rng.IntN(bankAccounts-1)
				if to >= from {
					to++
				}
				err := transfer(ctx, db, from, to, 1+rng.IntN(100), prepared, lock)
				switch {
				case err == nil:
					atomic.AddInt64(&res.transfers, 1)
				case ctx.Err() != nil:
				case retryable(err):
					atomic.AddInt64(&res.retries, 1)
				case mysqlErrNo(err) == 4025:
					atomic.AddInt64(&res.belowMin, 1)
				default:
					res.fail(err)
				}
			}
		}()
	}
	// audit checks sums of every balance, as long as the run lasts.
	audit := func(name string, sum func() (int, error)) {
		defer wg.Done()
		for ctx.Err() == nil {
			v, err := sum()
			if err != nil {
				if ctx.Err() == nil && !retryable(err) {
					res.fail(err)
				}
				continue
			}
			atomic.AddInt64(&res.audits, 1)
			if v != bankAccounts*bankStart {
				mu.Lock()
				res.badSums = append(res.badSums, fmt.Sprintf("%s: %d (at %v)", name, v, time.Since(began).Round(time.Millisecond)))
				mu.Unlock()
			}
		}
	}
	const sumQuery = "SELECT SUM(bal) FROM bank_acct"
	// The sum in a transaction is a locking read of every account by key:
	// lockproxy takes each row's lock (as the transfers do) and InnoDB a
	// share lock, so it sees only balanced states if every transfer
	// committed whole. A REPEATABLE READ snapshot would not do: MariaDB
	// 10.11.14 lets about one snapshot read in 2,000 see a transfer half
	// applied under this load, with the FOR UPDATE code run directly and no
	// lockproxy anywhere, even when the transfers lock in id order and none
	// is ever rolled back; SERIALIZABLE sums, which InnoDB reads under share
	// locks as this one is, saw none in 20 such runs.
	ids := make([]string, bankAccounts)
	for i := range ids {
		ids[i] = strconv.Itoa(i)
	}
	lockedSum := "SELECT SUM(bal) FROM bank_acct WHERE id IN (" + strings.Join(ids, ", ") + ") LOCK IN SHARE MODE"
	for a := range 2 {
		db := via[a%len(via)]
		wg.Add(1)
		go audit("in a transaction", func() (sum int, err error) {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return 0, err
			}
			defer func() { _ = tx.Rollback() }()
			return sum, tx.QueryRowContext(ctx, lockedSum).Scan(&sum)
		})
	}
	if replica {
		// An autocommit read goes to the replica, whose one SQL thread
		// applies each transfer whole before the next.
		wg.Add(1)
		go audit("autocommit on the replica", func() (sum int, err error) {
			return sum, via[0].QueryRowContext(ctx, sumQuery).Scan(&sum)
		})
	}
	wg.Add(1)
	go func() { // a direct writer of a column no transfer reads
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			_, _ = direct.ExecContext(ctx, "UPDATE bank_acct SET touched = touched + 1 WHERE id = ?", i%bankAccounts)
			time.Sleep(2 * time.Millisecond)
		}
	}()
	wg.Wait()
	if err := direct.QueryRow("SELECT SUM(bal), SUM(bal < 0) FROM bank_acct").Scan(&res.total, &res.negative); err != nil {
		t.Fatal(err)
	}
	return res
}

// TestBankTwoProxies: the bank workload through two lockproxy instances
// on Redis, in text and prepared form, keeps every invariant; the same
// code directly against MariaDB is shown for comparison.
func TestBankTwoProxies(t *testing.T) {
	bed := testbed.Get(t)
	const dbName = "e2e_bank"
	direct := bankDB(t, bed, dbName)
	locks := redisLocks(bed, "10s", "5s")
	a := start(t, bed, locks, bankRule(dbName))
	b := start(t, bed, locks, bankRule(dbName))
	const workers = 8
	for _, mode := range []struct {
		name     string
		prepared bool
	}{{"text", false}, {"prepared", true}} {
		t.Run(mode.name, func(t *testing.T) {
			params := "interpolateParams=false"
			via := []*sql.DB{open(t, bed, a.addr, dbName, params, workers), open(t, bed, b.addr, dbName, params, workers)}
			const d = 3 * time.Second
			res := runBank(t, direct, via, workers, d, mode.prepared, false, false)
			t.Logf("through two lockproxy instances: %v", res)
			onPrimary := []*sql.DB{open(t, bed, bed.PrimaryAddr, dbName, params, workers)}
			raw := runBank(t, direct, onPrimary, workers, d, mode.prepared, false, false)
			t.Logf("directly against MariaDB:        %v", raw)
			// For the record, not asserted (speed is the bench's): the
			// same transfers written correctly, with FOR UPDATE, directly.
			locked := runBank(t, direct, onPrimary, workers, d, mode.prepared, true, false)
			t.Logf("directly with FOR UPDATE:        %v (lockproxy/FOR UPDATE %.2fx)", locked, float64(res.transfers)/float64(max(locked.transfers, 1)))

			res.check(t)
		})
	}
}

// mysqlErrNo is err's MySQL error number, 0 if it has none.
func mysqlErrNo(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

// bankRewriteRule guards bank_acct.bal by a rewrite alone (no row locks):
// every absolute UPDATE of a balance read in the transaction becomes
// conditional (cas: on the value read; delta: applied as the change).
func bankRewriteRule(db, mode string) string {
	return fmt.Sprintf(`rules:
  - name: bank
    table: %s.bank_acct
    key: [id]
    lock: []
    rewrite:
      column: bal
      mode: %s
      min: 0
`, db, mode)
}

// withReplica puts the bed's replica in the backends section of a config
// whose locks section follows it (see config).
func withReplica(bed *testbed.Bed, locks string) string {
	return fmt.Sprintf("  replicas: [%s]\n  max_replica_lag: 2s\n%s", bed.ReplicaAddr, locks)
}

// multiplexing puts backends.pool.multiplex, with at most n primary
// connections per instance, in the backends section of a config whose
// locks section follows it (see config).
func multiplexing(n int, locks string) string {
	return fmt.Sprintf("  pool:\n    multiplex: true\n    max_connections: %d\n    wait_timeout: 10s\n%s", n, locks)
}

// TestBankVariants: the same transfers keep every invariant through two
// instances with a replica configured (reads in transactions stay on the
// primary), through two that multiplex their sessions over fewer primary
// connections than there are clients, and through rewrite rules alone, without row locks: cas makes
// a write of a stale balance lose (1213, retried), delta applies each
// write as the change the transfer computed (a transfer that would take
// a balance below 0 is refused with 4025).
func TestBankVariants(t *testing.T) {
	bed := testbed.Get(t)
	const dbName = "e2e_bank_variants"
	direct := bankDB(t, bed, dbName)
	locks := redisLocks(bed, "10s", "5s")
	const workers = 8
	for _, v := range []struct {
		name     string
		locks    string
		rule     string
		prepared bool
		replica  bool
	}{
		{"replica, text", withReplica(bed, locks), bankRule(dbName), false, true},
		{"replica, prepared", withReplica(bed, locks), bankRule(dbName), true, true},
		{"multiplexed, text", multiplexing(3, locks), bankRule(dbName), false, false},
		{"multiplexed, prepared", multiplexing(3, locks), bankRule(dbName), true, false},
		{"rewrite cas, text", locks, bankRewriteRule(dbName, "cas"), false, false},
		{"rewrite delta, prepared", locks, bankRewriteRule(dbName, "delta"), true, false},
	} {
		t.Run(v.name, func(t *testing.T) {
			a, b := start(t, bed, v.locks, v.rule), start(t, bed, v.locks, v.rule)
			params := "interpolateParams=false"
			via := []*sql.DB{open(t, bed, a.addr, dbName, params, workers), open(t, bed, b.addr, dbName, params, workers)}
			res := runBank(t, direct, via, workers, 2*time.Second, v.prepared, false, v.replica)
			t.Logf("%s: %v", v.name, res)
			res.check(t)
		})
	}
}
