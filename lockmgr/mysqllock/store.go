package mysqllock

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockproxy/lockproxy/lockmgr/internal/pollwait"
)

// store is the lock table as a pollwait.Store. Every statement is one
// autocommit round trip.
type store struct {
	db  *sql.DB
	tn  tableName
	ttl int64 // µs
	tkt int64 // ticket ttl, µs
	q   queries

	mu    sync.Mutex  // serialises table creation
	ready atomic.Bool // the tables exist
}

// queries are the statements, built once from the validated table name.
type queries struct {
	exists, take, insert, fence, state, wound, ticket, leaveTicket, release, renew, count, wounded string
}

// fenceNow is the database time in µs, the floor of every new fence.
const fenceNow = "CAST(UNIX_TIMESTAMP(NOW(6))*1000000 AS UNSIGNED)"

func newStore(db *sql.DB, tn tableName, ttl, ticketTTL time.Duration) *store {
	t, w := tn.quoted(""), tn.quoted("_wait")
	olderWaiter := "NOT EXISTS (SELECT 1 FROM " + w + " w WHERE w.kh = ? AND w.expires_at > NOW(6)" +
		" AND (w.prio < ? OR (w.prio = ? AND w.tok < ?)))"
	return &store{
		db: db, tn: tn, ttl: ttl.Microseconds(), tkt: ticketTTL.Microseconds(),
		q: queries{
			exists: "SELECT 1 FROM " + t + " JOIN " + w + " LIMIT 0",
			take: "UPDATE " + t + " SET owner = ?, own = ?, prio = ?, wounded = 0," +
				" fence = LAST_INSERT_ID(GREATEST(fence + 1, " + fenceNow + "))," +
				" expires_at = NOW(6) + INTERVAL ? MICROSECOND" +
				" WHERE kh = ? AND (owner = ? OR ((owner IS NULL OR expires_at < NOW(6)) AND " + olderWaiter + "))",
			insert: "INSERT INTO " + t + " (kh, lock_key, owner, own, prio, wounded, fence, expires_at)" +
				" SELECT ?, ?, ?, ?, ?, 0, LAST_INSERT_ID(" + fenceNow + "), NOW(6) + INTERVAL ? MICROSECOND" +
				" FROM DUAL WHERE " + olderWaiter,
			fence: "SELECT fence FROM " + t + " WHERE kh = ? AND owner = ?",
			state: "SELECT owner, own, prio, wounded, TIMESTAMPDIFF(MICROSECOND, NOW(6), expires_at)" +
				" FROM " + t + " WHERE kh = ?",
			wound: "UPDATE " + t + " SET wounded = 1 WHERE kh = ? AND owner = ?",
			ticket: "INSERT INTO " + w + " (kh, prio, tok, expires_at) VALUES (?, ?, ?, NOW(6) + INTERVAL ? MICROSECOND)" +
				" ON DUPLICATE KEY UPDATE expires_at = VALUES(expires_at)",
			leaveTicket: "DELETE FROM " + w + " WHERE kh = ? AND prio = ? AND tok = ?",
			release: "UPDATE " + t + " SET owner = NULL, own = NULL, wounded = 0, expires_at = NOW(6)" +
				" WHERE owner = ? AND kh IN ",
			renew:   "UPDATE " + t + " SET expires_at = NOW(6) + INTERVAL ? MICROSECOND WHERE owner IN ",
			count:   "SELECT owner, COUNT(*), MAX(wounded) FROM " + t + " WHERE owner IN ",
			wounded: "SELECT 1 FROM " + t + " WHERE wounded = 1 AND owner IN ",
		},
	}
}

func keyHash(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// placeholders is "(?, ?, ?)" for n values.
func placeholders(n int) string {
	return "(" + strings.Repeat("?, ", n-1) + "?)"
}

// Try implements pollwait.Store: take the row if free or expired, insert it
// if new; otherwise queue a ticket and wound a younger holder.
func (s *store) Try(ctx context.Context, r pollwait.Request) (pollwait.Result, error) {
	if err := s.ensure(ctx); err != nil {
		return pollwait.Result{}, err
	}
	kh, prio, own := keyHash(r.Key), r.Owner.Priority(), r.Owner.ID()
	older := []any{kh, prio, prio, r.Tok}
	// owner = tok: a grant whose reply was lost is ours again.
	res, err := s.db.ExecContext(ctx, s.q.take, append([]any{r.Tok, own, prio, s.ttl, kh, r.Tok}, older...)...)
	if err == nil {
		if n, _ := res.RowsAffected(); n == 1 {
			return s.granted(ctx, r, res)
		}
		res, err = s.db.ExecContext(ctx, s.q.insert, append([]any{kh, r.Key, r.Tok, own, prio, s.ttl}, older...)...)
		if err == nil {
			if n, _ := res.RowsAffected(); n == 1 {
				return s.granted(ctx, r, res)
			}
		}
	}
	if err != nil && !duplicate(err) {
		if retryable(err) {
			return pollwait.Result{Status: pollwait.Queued}, nil
		}
		return pollwait.Result{}, s.wrap("acquire", err)
	}
	return s.miss(ctx, r, kh)
}

// granted finishes a grant: the fence came back as LAST_INSERT_ID; a
// ticket of an earlier try is dropped.
func (s *store) granted(ctx context.Context, r pollwait.Request, res sql.Result) (pollwait.Result, error) {
	f, err := res.LastInsertId()
	if err == nil && f == 0 { // a server that does not report it
		err = s.db.QueryRowContext(ctx, s.q.fence, keyHash(r.Key), r.Tok).Scan(&f)
	}
	if err != nil {
		return pollwait.Result{}, s.wrap("read fence", err)
	}
	if r.Ticketed {
		// An error is harmless: the ticket is ours and expires; until then
		// it only holds back younger waiters.
		_, _ = s.db.ExecContext(ctx, s.q.leaveTicket, keyHash(r.Key), r.Owner.Priority(), r.Tok)
	}
	return pollwait.Result{Status: pollwait.Granted, Fence: uint64(f)}, nil
}

// miss queues our ticket, reads the holder and wounds it if younger.
func (s *store) miss(ctx context.Context, r pollwait.Request, kh []byte) (pollwait.Result, error) {
	if err := s.queue(ctx, r, kh); err != nil {
		return pollwait.Result{}, err
	}
	var owner, own sql.NullString
	var hprio, remaining sql.NullInt64
	var wounded int
	err := s.db.QueryRowContext(ctx, s.q.state, kh).Scan(&owner, &own, &hprio, &wounded, &remaining)
	if err != nil && err != sql.ErrNoRows {
		if retryable(err) {
			return pollwait.Result{Status: pollwait.Queued}, nil
		}
		return pollwait.Result{}, s.wrap("read lock row", err)
	}
	out := pollwait.Result{Status: pollwait.Queued}
	if owner.Valid && remaining.Int64 > 0 {
		out = pollwait.Result{Status: pollwait.Busy, Holder: own.String,
			Remaining: time.Duration(remaining.Int64) * time.Microsecond}
		if wounded == 0 && own.String != r.Owner.ID() && olderThan(r.Owner.Priority(), r.Owner.ID(), hprio.Int64, own.String) {
			if _, err := s.db.ExecContext(ctx, s.q.wound, kh, owner.String); err != nil && !retryable(err) {
				return pollwait.Result{}, s.wrap("wound holder", err)
			}
		}
	}
	return out, nil
}

// Queue implements pollwait.Store: queue or refresh r.Tok's ticket.
func (s *store) Queue(ctx context.Context, r pollwait.Request) error {
	if err := s.ensure(ctx); err != nil {
		return err
	}
	return s.queue(ctx, r, keyHash(r.Key))
}

func (s *store) queue(ctx context.Context, r pollwait.Request, kh []byte) error {
	if _, err := s.db.ExecContext(ctx, s.q.ticket, kh, r.Owner.Priority(), r.Tok, s.tkt); err != nil && !retryable(err) {
		return s.wrap("queue ticket", err)
	}
	return nil
}

// olderThan is lockmgr.Owner.Older on (priority, id) pairs.
func olderThan(p1 int64, id1 string, p2 int64, id2 string) bool {
	if p1 != p2 {
		return p1 < p2
	}
	return id1 < id2
}

// Release implements pollwait.Store: compare-and-release, one statement.
func (s *store) Release(ctx context.Context, tok string, keys []string, _ []uint64) error {
	args := make([]any, 0, len(keys)+1)
	args = append(args, tok)
	for _, k := range keys {
		args = append(args, keyHash(k))
	}
	if err := s.execRetried(ctx, s.q.release+placeholders(len(keys)), args...); err != nil {
		return s.wrap("release", err)
	}
	return nil
}

// Leave implements pollwait.Store.
func (s *store) Leave(ctx context.Context, r pollwait.Request) error {
	if err := s.execRetried(ctx, s.q.leaveTicket, keyHash(r.Key), r.Owner.Priority(), r.Tok); err != nil {
		return s.wrap("leave queue", err)
	}
	return s.Release(ctx, r.Tok, []string{r.Key}, nil)
}

// retryPauses are the pauses before each repeat of a statement InnoDB
// chose as a deadlock victim or timed out on a row lock.
var retryPauses = []time.Duration{time.Millisecond, 4 * time.Millisecond, 16 * time.Millisecond, 64 * time.Millisecond}

// execRetried runs a statement that is safe to repeat (a release, a
// renewal, leaving the queue: each sets rows to a state that does not
// depend on how often it ran). InnoDB rolls back a deadlock victim and
// expects it to be repeated; giving up instead would leave a released row
// held until its lease ran out, so it is repeated while ctx allows.
func (s *store) execRetried(ctx context.Context, q string, args ...any) error {
	for i := 0; ; i++ {
		_, err := s.db.ExecContext(ctx, q, args...)
		if err == nil || !retryable(err) || i == len(retryPauses) {
			return err
		}
		t := time.NewTimer(retryPauses[i])
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// renewChunk bounds the tokens of one renewal statement (placeholders).
const renewChunk = 500

// Renew implements pollwait.Store: per chunk of tokens, one UPDATE for
// every held row, then one SELECT counting the rows still ours and their
// wounded flags.
func (s *store) Renew(ctx context.Context, held []pollwait.Held) ([]pollwait.RenewResult, error) {
	out := make([]pollwait.RenewResult, 0, len(held))
	for len(held) > 0 {
		n := min(len(held), renewChunk)
		res, err := s.renew(ctx, held[:n])
		if err != nil {
			return nil, err
		}
		out = append(out, res...)
		held = held[n:]
	}
	return out, nil
}

func (s *store) renew(ctx context.Context, held []pollwait.Held) ([]pollwait.RenewResult, error) {
	toks := make([]any, len(held))
	for i, h := range held {
		toks[i] = h.Tok
	}
	in := placeholders(len(toks))
	if err := s.execRetried(ctx, s.q.renew+in, append([]any{s.ttl}, toks...)...); err != nil {
		return nil, s.wrap("renew", err)
	}
	rows, err := s.db.QueryContext(ctx, s.q.count+in+" GROUP BY owner", toks...)
	if err != nil {
		return nil, s.wrap("check renewal", err)
	}
	defer rows.Close()
	type seen struct{ n, wounded int }
	got := map[string]seen{}
	for rows.Next() {
		var tok string
		var v seen
		if err := rows.Scan(&tok, &v.n, &v.wounded); err != nil {
			return nil, s.wrap("check renewal", err)
		}
		got[tok] = v
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("check renewal", err)
	}
	out := make([]pollwait.RenewResult, len(held))
	for i, h := range held {
		v := got[h.Tok]
		out[i] = pollwait.RenewResult{State: pollwait.Renewed, Wounded: v.wounded != 0}
		if v.n < len(h.Keys) {
			out[i].State = pollwait.Lost
		}
	}
	return out, nil
}

// Wounded implements pollwait.Store.
func (s *store) Wounded(ctx context.Context, held []pollwait.Held) (bool, error) {
	toks := make([]any, len(held))
	for i, h := range held {
		toks[i] = h.Tok
	}
	var one int
	err := s.db.QueryRowContext(ctx, s.q.wounded+placeholders(len(toks))+" LIMIT 1", toks...).Scan(&one)
	switch {
	case err == sql.ErrNoRows:
		return false, nil
	case err != nil:
		return false, s.wrap("wounded check", err)
	}
	return true, nil
}
