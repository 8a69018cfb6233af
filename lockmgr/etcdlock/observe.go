package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockproxy/lockproxy/lockmgr"
)

var _ lockmgr.Observer = (*Locker)(nil)

// notesDir is where observe mode's notes on key name live: one key per
// observing owner, its create revision the note's place.
func (l *Locker) notesDir(name string) string {
	return l.opt.Prefix + "/observe/" + url.PathEscape(name) + "/"
}

// Observe implements lockmgr.Observer in one transaction for all keys:
// per key it reads the first entry of the lock's queue (the holder, or
// the waiter about to be) and the notes, then puts owner's note, attached
// to the Locker's session lease. A put on an existing note keeps its
// create revision, so a note keeps its place; a note lives until
// EndObserve or until the session lease ends (the instance is gone).
func (l *Locker) Observe(ctx context.Context, owner lockmgr.Owner, keys []lockmgr.Key) (map[string][]string, error) {
	if l.closed() {
		return nil, lockmgr.ErrClosed
	}
	keys, err := lockmgr.NormalizeKeys(keys)
	if err != nil {
		return nil, err
	}
	s, err := l.session(ctx)
	if err != nil {
		return nil, l.observeErr(ctx, err)
	}
	id := owner.ID()
	byCreate := clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)
	var reads, puts []clientv3.Op
	for _, k := range keys {
		reads = append(reads,
			clientv3.OpGet(l.dir(k.Name), clientv3.WithPrefix(), byCreate, clientv3.WithLimit(1)),
			clientv3.OpGet(l.notesDir(k.Name), clientv3.WithPrefix(), byCreate))
		puts = append(puts, clientv3.OpPut(l.notesDir(k.Name)+url.PathEscape(id), id, clientv3.WithLease(s.id)))
	}
	octx, cancel := l.opCtx(ctx)
	defer cancel()
	resp, err := l.cli.Txn(octx).Then(append(reads, puts...)...).Commit()
	if err != nil {
		return nil, l.observeErr(ctx, l.away(octx, err))
	}
	var out map[string][]string
	for i, k := range keys {
		var others []string
		if kvs := resp.Responses[2*i].GetResponseRange().Kvs; len(kvs) > 0 {
			if e, err := parseEntry(kvs[0].Value); err == nil && e.Owner != id {
				others = append(others, e.Owner)
			}
		}
		notes := resp.Responses[2*i+1].GetResponseRange().Kvs
		for _, kv := range notes {
			if string(kv.Value) == id {
				break // the notes after owner's came later
			}
			if o := string(kv.Value); len(others) == 0 || others[0] != o {
				others = append(others, o)
			}
		}
		if len(others) > 0 {
			if out == nil {
				out = map[string][]string{}
			}
			out[k.Name] = others
		}
	}
	return out, nil
}

// EndObserve implements lockmgr.Observer: one transaction deleting
// owner's notes.
func (l *Locker) EndObserve(ctx context.Context, owner lockmgr.Owner, keys []lockmgr.Key) error {
	keys, err := lockmgr.NormalizeKeys(keys)
	if err != nil {
		return err
	}
	id := url.PathEscape(owner.ID())
	ops := make([]clientv3.Op, len(keys))
	for i, k := range keys {
		ops[i] = clientv3.OpDelete(l.notesDir(k.Name) + id)
	}
	octx, cancel := l.opCtx(ctx)
	defer cancel()
	if _, err := l.cli.Txn(octx).Then(ops...).Commit(); err != nil {
		err = l.away(octx, err)
		if unavailable(err) || errors.Is(err, errAway) {
			// The notes live with the session lease: left alone, other
			// instances would see owner in these keys' way for as long
			// as the session lives.
			paths := make([]string, len(keys))
			for i, k := range keys {
				paths[i] = l.notesDir(k.Name) + id
			}
			l.mu.Lock()
			s := l.sess
			l.mu.Unlock()
			if s != nil {
				l.deleteLater(s, paths)
			}
		}
		return l.observeErr(ctx, err)
	}
	return nil
}

func (l *Locker) observeErr(ctx context.Context, err error) error {
	if unavailable(err) || ctx.Err() != nil {
		return fmt.Errorf("%w: etcdlock: observe: %w", lockmgr.ErrUnavailable, err)
	}
	return fmt.Errorf("etcdlock: observe: %w", err)
}
