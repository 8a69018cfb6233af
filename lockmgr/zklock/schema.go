package zklock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproxy/lockproxy/lockmgr"
)

var _ lockmgr.SchemaAnnouncer = (*Locker)(nil)

// schemaPath is the znode the Lockers sharing a Root announce schema
// changes on: each announcement sets its data to the announcer's id,
// which raises its version.
func (l *Locker) schemaPath() string { return l.opt.Root + "/schema" }

// AnnounceSchemaChange implements lockmgr.SchemaAnnouncer: one set of the
// schema znode (created with Root when missing), bounded by ctx
// (OpTimeout without a deadline).
func (l *Locker) AnnounceSchemaChange(ctx context.Context) error {
	_, err := call(ctx, l, func() (struct{}, error) { return struct{}{}, l.setSchema() })
	if err != nil {
		return fmt.Errorf("%w: zookeeper: announce a schema change: %w", lockmgr.ErrUnavailable, err)
	}
	return nil
}

func (l *Locker) setSchema() error {
	p, data := l.schemaPath(), []byte(l.id)
	for {
		stat, err := l.conn.Set(p, data, -1)
		if err == nil {
			l.schema.Own(int64(stat.Version))
		}
		if !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		_, err = l.conn.Create(l.opt.Root, nil, zk.FlagPersistent, zk.WorldACL(zk.PermAll))
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
		_, err = l.conn.Create(p, data, zk.FlagPersistent, zk.WorldACL(zk.PermAll))
		if err == nil {
			l.schema.Own(0)
		}
		if !errors.Is(err, zk.ErrNodeExists) {
			return err // made (version 0, by this Locker) or failed
		}
		// Made by another meanwhile: set it.
		if l.closed() {
			return lockmgr.ErrClosed
		}
	}
}

// SchemaChanges implements lockmgr.SchemaAnnouncer.
func (l *Locker) SchemaChanges() <-chan struct{} { return l.schema.C() }

// schemaState is the schema znode as read, with the watch set on it.
type schemaState struct {
	version int64 // -1: no znode
	writer  string
	watch   <-chan zk.Event
}

// followSchema reads the schema znode with a watch for the Locker's
// lifetime, again at every event on it (a change, a reconnection, a
// session expiry) and after ZooKeeper was away, and delivers the versions
// the other Lockers' announcements made: a change made while ZooKeeper
// was away from here is seen as a version jump when it answers again.
func (l *Locker) followSchema() {
	defer l.wg.Done()
	for !l.closed() {
		st, err := call(l.ctx, l, l.readSchema)
		if err != nil {
			select {
			case <-l.ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		l.schema.Seen(st.version, st.writer)
		select {
		case <-l.ctx.Done():
		case <-st.watch:
		}
	}
}

func (l *Locker) readSchema() (schemaState, error) {
	p := l.schemaPath()
	for {
		data, stat, ch, err := l.conn.GetW(p)
		if err == nil {
			return schemaState{version: int64(stat.Version), writer: string(data), watch: ch}, nil
		}
		if !errors.Is(err, zk.ErrNoNode) {
			return schemaState{}, err
		}
		ok, _, ch, err := l.conn.ExistsW(p)
		if err != nil {
			return schemaState{}, err
		}
		if !ok {
			return schemaState{version: -1, watch: ch}, nil
		}
		// Made between the two reads: read it.
	}
}
