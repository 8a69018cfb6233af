package zklock

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/lockproxy/lockproxy/lockmgr"
)

var _ lockmgr.Observer = (*Locker)(nil)

// notes are the observe notes this Locker made: owner id NUL key -> the
// note's znode path.
type notes struct {
	mu    sync.Mutex
	paths map[string]string
}

func (n *notes) get(id, key string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.paths[id+"\x00"+key]
}

func (n *notes) set(id, key, p string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.paths == nil {
		n.paths = map[string]string{}
	}
	if p == "" {
		delete(n.paths, id+"\x00"+key)
	} else {
		n.paths[id+"\x00"+key] = p
	}
}

func (l *Locker) notesDir(name string) string { return l.opt.Root + "/observe/" + escape(name) }

// note is one observe note's znode name, parsed: <escaped owner>-<seq>.
type note struct {
	owner string
	seq   int64
}

func parseNote(name string) (note, bool) {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return note{}, false
	}
	seq, err := strconv.ParseInt(name[i+1:], 10, 64)
	owner, uerr := url.PathUnescape(name[:i])
	if err != nil || uerr != nil {
		return note{}, false
	}
	return note{owner: owner, seq: seq}, true
}

// Observe implements lockmgr.Observer. Per key, all at once on the one
// connection (so in about one round trip): the key's lock znodes, the
// notes under R/observe/<K>, and, the first time owner observes the key,
// the create of its note, an ephemeral sequential znode whose sequence
// is its place. A key someone holds costs one more round trip: reading
// the holder's znode for its owner. Notes end with EndObserve, or with
// the Locker's session.
func (l *Locker) Observe(ctx context.Context, owner lockmgr.Owner, keys []lockmgr.Key) (map[string][]string, error) {
	if l.closed() {
		return nil, lockmgr.ErrClosed
	}
	keys, err := lockmgr.NormalizeKeys(keys)
	if err != nil {
		return nil, err
	}
	if err := l.ensureSetup(ctx); err != nil {
		return nil, observeErr(err)
	}
	id := owner.ID()
	found := make([][]string, len(keys))
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			found[i], errs[i] = l.observeKey(ctx, id, k.Name)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, observeErr(err)
	}
	var out map[string][]string
	for i, k := range keys {
		if len(found[i]) > 0 {
			if out == nil {
				out = map[string][]string{}
			}
			out[k.Name] = found[i]
		}
	}
	return out, nil
}

func observeErr(err error) error {
	if unavailable(err) {
		return fmt.Errorf("%w: zklock: observe: %w", lockmgr.ErrUnavailable, err)
	}
	return fmt.Errorf("zklock: observe: %w", err)
}

func (l *Locker) observeKey(ctx context.Context, id, key string) ([]string, error) {
	dir := l.notesDir(key)
	mine := l.notes.get(id, key)
	var created string
	var cerr error
	var wg sync.WaitGroup
	if mine == "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			created, cerr = l.createNote(ctx, dir, id)
		}()
	}
	var locks, names []string
	var lerr, nerr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		locks, lerr = l.children(ctx, l.keyDir(key))
	}()
	go func() {
		defer wg.Done()
		names, nerr = l.children(ctx, dir)
	}()
	wg.Wait()
	if err := errors.Join(cerr, lerr, nerr); err != nil {
		return nil, err
	}
	if created != "" {
		mine = created
		l.notes.set(id, key, mine)
	}
	me, _ := parseNote(path.Base(mine))
	if !slices.Contains(names, path.Base(mine)) && created == "" {
		// The note went with a session that expired: note again.
		l.notes.set(id, key, "")
		return l.observeKey(ctx, id, key)
	}
	var others []string
	if h, err := l.holder(ctx, key, locks); err != nil {
		return nil, err
	} else if h != "" && h != id {
		others = append(others, h)
	}
	var before []note
	for _, name := range names {
		if n, ok := parseNote(name); ok && n.seq < me.seq && n.owner != id {
			before = append(before, n)
		}
	}
	slices.SortFunc(before, func(a, b note) int { return int(a.seq - b.seq) })
	for _, n := range before {
		if !slices.Contains(others, n.owner) {
			others = append(others, n.owner)
		}
	}
	return others, nil
}

// createNote creates owner's note under dir (and dir, a container, if
// it is missing).
func (l *Locker) createNote(ctx context.Context, dir, id string) (string, error) {
	for try := 0; ; try++ {
		p, err := call(ctx, l, func() (string, error) {
			return l.conn.Create(dir+"/"+url.PathEscape(id)+"-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
		})
		if errors.Is(err, zk.ErrNoNode) && try < 3 {
			_, err = call(ctx, l, func() (string, error) {
				return l.conn.CreateContainer(dir, nil, zk.FlagContainer, zk.WorldACL(zk.PermAll))
			})
			if err != nil && !errors.Is(err, zk.ErrNodeExists) {
				return "", err
			}
			continue
		}
		return p, err
	}
}

// children lists dir's znodes; a missing dir has none.
func (l *Locker) children(ctx context.Context, dir string) ([]string, error) {
	names, err := call(ctx, l, func() ([]string, error) {
		c, _, err := l.conn.Children(dir)
		return c, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	return names, err
}

// holder reads the owner of the first of the key's lock znodes (the
// holder, or the waiter about to hold); "" when there is none.
func (l *Locker) holder(ctx context.Context, key string, names []string) (string, error) {
	var first *node
	for _, name := range names {
		if n, ok := parseNode(name); ok && (first == nil || n.seq < first.seq) {
			first = &n
		}
	}
	if first == nil {
		return "", nil
	}
	data, err := call(ctx, l, func() ([]byte, error) {
		b, _, err := l.conn.Get(l.keyDir(key) + "/" + first.name)
		return b, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return "", nil // released meanwhile
	}
	if err != nil {
		return "", err
	}
	e, err := parseEntry(data)
	if err != nil {
		return "", err
	}
	return e.Owner, nil
}

// EndObserve implements lockmgr.Observer: deletes owner's notes, all at
// once.
func (l *Locker) EndObserve(ctx context.Context, owner lockmgr.Owner, keys []lockmgr.Key) error {
	id := owner.ID()
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		p := l.notes.get(id, k.Name)
		if p == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := call(ctx, l, func() (struct{}, error) { return struct{}{}, l.conn.Delete(p, -1) })
			if err == nil || errors.Is(err, zk.ErrNoNode) {
				l.notes.set(id, k.Name, "")
				err = nil
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		// The notes are ephemeral znodes of the session: left alone,
		// other instances would see owner in these keys' way for as long
		// as the session lives.
		sid := l.conn.SessionID()
		var left []ownNode
		for i, k := range keys {
			if errs[i] != nil && unavailable(errs[i]) {
				left = append(left, ownNode{path: l.notes.get(id, k.Name)})
				l.notes.set(id, k.Name, "")
			}
		}
		l.deleteLater(sid, left)
		return observeErr(err)
	}
	return nil
}
