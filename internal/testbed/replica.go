package testbed

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// ErrReplicaBehind is returned by WaitReplicaCaughtUp when the replica has
// not applied the primary's position in time.
var ErrReplicaBehind = errors.New("testbed: replica has not caught up")

// defaultWait bounds the helpers below when ctx has no deadline.
const defaultWait = time.Minute

// StopReplica runs STOP SLAVE on the replica: the server keeps answering
// but applies nothing more until StartReplica. It returns ErrShared on a
// shared bed.
func (b *Bed) StopReplica(ctx context.Context) error {
	if b.Shared {
		return ErrShared
	}
	ctx, cancel := bounded(ctx, defaultWait)
	defer cancel()
	return b.exec(ctx, b.ReplicaAddr, "STOP SLAVE")
}

// StartReplica runs START SLAVE on the replica and waits until both its IO
// and SQL threads run. It returns ErrShared on a shared bed.
func (b *Bed) StartReplica(ctx context.Context) error {
	if b.Shared {
		return ErrShared
	}
	ctx, cancel := bounded(ctx, defaultWait)
	defer cancel()
	if err := b.exec(ctx, b.ReplicaAddr, "START SLAVE"); err != nil {
		return err
	}
	for {
		st, err := b.ReplicaStatus(ctx)
		if err != nil {
			return err
		}
		if st["Slave_IO_Running"] == "Yes" && st["Slave_SQL_Running"] == "Yes" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testbed: replication did not start (IO=%s SQL=%s, %s %s): %w",
				st["Slave_IO_Running"], st["Slave_SQL_Running"], st["Last_IO_Error"], st["Last_SQL_Error"], ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ReplicaStatus returns SHOW SLAVE STATUS of the replica, column name to
// value (NULL as ""), e.g. "Slave_SQL_Running" or "Seconds_Behind_Master".
func (b *Bed) ReplicaStatus(ctx context.Context) (map[string]string, error) {
	ctx, cancel := bounded(ctx, defaultWait)
	defer cancel()
	db, err := b.conn(b.ReplicaAddr)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SHOW SLAVE STATUS")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	st := make(map[string]string, len(cols))
	if !rows.Next() {
		return st, rows.Err()
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	for i, c := range cols {
		st[c] = vals[i].String
	}
	return st, rows.Err()
}

// WaitReplicaCaughtUp waits until the replica has applied everything the
// primary had logged when it was called (MASTER_GTID_WAIT of the primary's
// @@gtid_binlog_pos). Without a deadline on ctx it waits at most a minute.
// It is safe on a shared bed.
func (b *Bed) WaitReplicaCaughtUp(ctx context.Context) error {
	ctx, cancel := bounded(ctx, defaultWait)
	defer cancel()
	p, err := b.conn(b.PrimaryAddr)
	if err != nil {
		return err
	}
	defer p.Close()
	var pos string
	if err := p.QueryRowContext(ctx, "SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
		return fmt.Errorf("testbed: primary position: %w", err)
	}
	if pos == "" {
		return nil
	}
	r, err := b.conn(b.ReplicaAddr)
	if err != nil {
		return err
	}
	defer r.Close()
	deadline, _ := ctx.Deadline()
	wait := time.Until(deadline).Seconds()
	var res sql.NullInt64
	if err := r.QueryRowContext(ctx, "SELECT MASTER_GTID_WAIT(?, ?)", pos, wait).Scan(&res); err != nil {
		return fmt.Errorf("testbed: MASTER_GTID_WAIT(%s): %w", pos, err)
	}
	if !res.Valid || res.Int64 != 0 {
		return fmt.Errorf("%w: position %s not reached in %.0fs", ErrReplicaBehind, pos, wait)
	}
	return nil
}

// bounded gives ctx a deadline of d from now unless it has one already.
func bounded(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}
