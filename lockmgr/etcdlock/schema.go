package etcdlock

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockproxy/lockproxy/lockmgr"
)

var _ lockmgr.SchemaAnnouncer = (*Locker)(nil)

// schemaKey is where the Lockers sharing a prefix announce schema changes:
// each announcement puts it, with the announcer's id as the value.
func (l *Locker) schemaKey() string { return l.opt.Prefix + "/schema" }

// AnnounceSchemaChange implements lockmgr.SchemaAnnouncer: one Put of the
// schema key, bounded by ctx (OpTimeout without a deadline).
func (l *Locker) AnnounceSchemaChange(ctx context.Context) error {
	ctx, cancel := l.opCtx(ctx)
	defer cancel()
	if _, err := l.cli.Put(ctx, l.schemaKey(), l.id); err != nil {
		return fmt.Errorf("%w: etcd: announce a schema change: %w", lockmgr.ErrUnavailable, err)
	}
	return nil
}

// SchemaChanges implements lockmgr.SchemaAnnouncer.
func (l *Locker) SchemaChanges() <-chan struct{} { return l.schema.C() }

// followSchema watches the schema key for the Locker's lifetime and
// delivers the other Lockers' puts. The watch resumes from the last
// revision seen, so puts made while etcd was away are delivered when it
// answers again; when that history was compacted away, a change is
// delivered anyway (it may have been missed).
func (l *Locker) followSchema() {
	defer l.wg.Done()
	var rev int64 // the last revision the watch covered; 0: none yet
	for l.ctx.Err() == nil {
		if rev == 0 {
			rev = l.schemaBaseline()
		}
		if rev != 0 {
			rev = l.watchSchema(rev)
		}
		select { // the watch ended (no leader, etcd down): start it again
		case <-l.ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// schemaBaseline is the current revision (0 when etcd does not answer):
// the first one is where following starts; a later one (after the
// watch's history was lost) delivers a change.
func (l *Locker) schemaBaseline() int64 {
	ctx, cancel := l.opCtx(l.ctx)
	defer cancel()
	resp, err := l.cli.Get(ctx, l.schemaKey())
	if err != nil {
		return 0
	}
	l.schema.Seen(resp.Header.Revision, "")
	return resp.Header.Revision
}

// watchSchema watches the schema key from after revision rev until the
// watch ends, and returns the revision to resume from (0: start over from
// a new baseline).
func (l *Locker) watchSchema(rev int64) int64 {
	wch := l.cli.Watch(clientv3.WithRequireLeader(l.ctx), l.schemaKey(),
		clientv3.WithRev(rev+1), clientv3.WithFilterDelete())
	for resp := range wch {
		if resp.CompactRevision != 0 {
			return 0
		}
		for _, ev := range resp.Events {
			rev = ev.Kv.ModRevision
			if string(ev.Kv.Value) != l.id {
				l.schema.Signal()
			}
		}
	}
	return rev
}
