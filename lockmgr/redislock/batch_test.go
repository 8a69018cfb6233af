package redislock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap/zaptest"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/servertest"
)

// gate holds the first pipeline it sees until released, and records the
// size of every pipeline.
type gate struct {
	hold    chan struct{}
	held    atomic.Bool
	mu      sync.Mutex
	batches []int
}

func (g *gate) DialHook(next redis.DialHook) redis.DialHook { return next }
func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}
func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if g.held.CompareAndSwap(false, true) {
			<-g.hold
		}
		g.mu.Lock()
		g.batches = append(g.batches, len(cmds))
		g.mu.Unlock()
		return next(ctx, cmds)
	}
}

// together makes call(0) and holds its pipeline on its way, makes call(1)
// to call(n-1) meanwhile, lets the pipeline go once those n-1 calls wait
// in b, and returns the sizes of the pipelines sent when every call has
// returned.
func (g *gate) together(t *testing.T, b *batcher, n int, call func(i int)) []int {
	t.Helper()
	var wg sync.WaitGroup
	start := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			call(i)
		}()
	}
	start(0)
	testbed.Eventually(t, 10*time.Second, "the first call's pipeline held", func() bool { return g.held.Load() })
	for i := 1; i < n; i++ {
		start(i)
	}
	testbed.Eventually(t, 10*time.Second, fmt.Sprintf("%d calls waiting for the next batch", n-1), func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.pending) == n-1
	})
	close(g.hold)
	wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.batches)
}

// warmLocker is a Locker with prefix pfx on its own client of the bed's
// Redis, its connection and scripts warmed by one acquire and release, and
// a context that bounds the test.
func warmLocker(t *testing.T, pfx string) (redis.UniversalClient, *Locker, context.Context) {
	t.Helper()
	bed := testbed.Get(t)
	rdb := redis.NewUniversalClient(ClientOptions([]string{bed.RedisAddr}, "", false))
	t.Cleanup(func() { _ = rdb.Close() })
	l := New(rdb, &Options{TTL: time.Minute, Prefix: pfx, RestartGrace: -1, Logger: zaptest.NewLogger(t)})
	t.Cleanup(func() { _ = l.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	warm, err := l.Acquire(ctx, lockmgr.Owner{Instance: "warm", Session: 1, Start: time.Now()},
		[]lockmgr.Key{{Name: "warm-up", Rule: "r"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
	return rdb, l, ctx
}

// TestBatchedReleases: the releases that sessions of one Locker make while
// another is on its way to Redis go together in the next pipeline, one
// round trip for all; each gets its own reply.
func TestBatchedReleases(t *testing.T) {
	rdb, l, ctx := warmLocker(t, servertest.Unique("lptest-"))
	const n = 9
	leases := make([]*lockmgr.Lease, n)
	for i := range leases {
		o := lockmgr.Owner{Instance: "b", Session: uint64(i + 1), Start: time.Now()}
		lease, err := l.Acquire(ctx, o, []lockmgr.Key{{Name: fmt.Sprintf("k%d", i), Rule: "r"}})
		if err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
		leases[i] = lease
	}
	g := &gate{hold: make(chan struct{})}
	rdb.AddHook(g)
	// The first release is held on its way; eight more sessions give
	// theirs back meanwhile: one pipeline for the eight, and every key is
	// free after.
	got := g.together(t, &l.batch, n, func(i int) {
		if err := leases[i].Release(ctx); err != nil {
			t.Errorf("release %d: %v", i, err)
		}
	})
	if !slices.Contains(got, n-1) {
		t.Errorf("release pipelines of %v commands; want the %d waiting ones in one", got, n-1)
	}
	for i := range n {
		if v := rdb.Exists(ctx, l.names(fmt.Sprintf("k%d", i)).lock).Val(); v != 0 {
			t.Errorf("key k%d still held after its release", i)
		}
	}
}

// TestBatchedAcquires: the fast-path acquires that sessions of one Locker
// make while another is on its way to Redis go together in the next
// pipeline, one round trip for all; each gets its own reply (a key
// another Locker holds is not granted, the free ones are).
func TestBatchedAcquires(t *testing.T) {
	pfx := servertest.Unique("lptest-")
	rdb, l, ctx := warmLocker(t, pfx)
	_, other, _ := warmLocker(t, pfx)
	const n = 9
	// k8 is held by another instance: its acquire in the batch misses
	// and waits (here: until its short wait ends).
	if _, err := other.Acquire(ctx, lockmgr.Owner{Instance: "other", Session: 1, Start: time.Now()},
		[]lockmgr.Key{{Name: fmt.Sprintf("k%d", n-1), Rule: "r"}}); err != nil {
		t.Fatal(err)
	}
	g := &gate{hold: make(chan struct{})}
	rdb.AddHook(g)
	got := make([]error, n)
	batches := g.together(t, &l.acquires, n, func(i int) {
		wait := 20 * time.Second
		if i == n-1 {
			wait = time.Second
		}
		actx, acancel := context.WithTimeout(ctx, wait)
		defer acancel()
		o := lockmgr.Owner{Instance: "b", Session: uint64(i + 1), Start: time.Now()}
		_, got[i] = l.Acquire(actx, o, []lockmgr.Key{{Name: fmt.Sprintf("k%d", i), Rule: "r"}})
	})
	if !slices.Contains(batches, n-1) {
		t.Errorf("acquire pipelines of %v commands; want the %d waiting ones in one", batches, n-1)
	}
	for i := range n - 1 {
		if got[i] != nil {
			t.Errorf("acquire of free key k%d: %v", i, got[i])
		}
	}
	if !errors.Is(got[n-1], lockmgr.ErrWaitTimeout) {
		t.Errorf("acquire of k%d, held by another instance: %v; want a wait timeout", n-1, got[n-1])
	}
}

// TestBatchedAcquireGivenUp: an acquire whose wait ends while its SET NX
// is still queued behind a batch on its way, in a batch that goes anyway
// (another session's acquire in it waits longer), leaves nothing in Redis:
// the failed wait's cleanup goes after that SET, not ahead of it (which
// would leave the key held by nobody until its TTL).
func TestBatchedAcquireGivenUp(t *testing.T) {
	rdb, l, ctx := warmLocker(t, servertest.Unique("lptest-"))
	g := &gate{hold: make(chan struct{})}
	rdb.AddHook(g)
	patient := make(chan error, 2)
	acquire := func(session uint64, key string) {
		_, err := l.Acquire(ctx, lockmgr.Owner{Instance: "b", Session: session, Start: time.Now()},
			[]lockmgr.Key{{Name: key, Rule: "r"}})
		patient <- err
	}
	go acquire(1, "first")
	testbed.Eventually(t, 10*time.Second, "the first acquire's pipeline held", func() bool { return g.held.Load() })
	go acquire(2, "patient")
	batchQueued(t, &l.acquires, 1)
	wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer wcancel()
	if _, err := l.Acquire(wctx, lockmgr.Owner{Instance: "b", Session: 3, Start: time.Now()},
		[]lockmgr.Key{{Name: "given-up", Rule: "r"}}); !errors.Is(err, lockmgr.ErrWaitTimeout) {
		t.Fatalf("acquire queued behind a held batch, its wait ended: %v; want a wait timeout", err)
	}
	close(g.hold)
	for range 2 {
		if err := <-patient; err != nil {
			t.Fatalf("acquire that waited long enough: %v", err)
		}
	}
	key := l.names("given-up").lock
	testbed.Eventually(t, 5*time.Second, "the given-up key not held in Redis", func() bool {
		return rdb.Exists(ctx, key).Val() == 0
	})
}

// TestBatchHandedOnPastAGivenUpCaller: the batch that gathers while one
// is on its way is sent by the caller of one of its calls; when the first
// of them stopped waiting (its wait ended), the next one still waiting
// sends it, and when none waits any more, it goes on its own. Either way
// the batcher is ready for the next.
func TestBatchHandedOnPastAGivenUpCaller(t *testing.T) {
	for _, patient := range []bool{true, false} {
		t.Run(fmt.Sprintf("patient=%v", patient), func(t *testing.T) {
			rdb, l, ctx := warmLocker(t, servertest.Unique("lptest-"))
			g := &gate{hold: make(chan struct{})}
			rdb.AddHook(g)
			b := &l.acquires
			key := l.names("handed-on").lock
			first := batchDo(ctx, b, "ping")
			testbed.Eventually(t, 10*time.Second, "the first pipeline held", func() bool { return g.held.Load() })
			wctx, wcancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer wcancel()
			givenUp := batchDo(wctx, b, "set", key, "1", "px", 60000)
			batchQueued(t, b, 1)
			var later chan error
			if patient {
				later = batchDo(ctx, b, "ping")
				batchQueued(t, b, 2)
			}
			if err := <-givenUp; !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("call queued behind a held batch, its wait ended: %v; want its deadline", err)
			}
			close(g.hold)
			if err := <-first; err != nil {
				t.Fatal(err)
			}
			if later != nil {
				if err := <-later; err != nil {
					t.Fatalf("the caller that sent the batch: %v", err)
				}
			}
			// The given-up call runs when a call still waiting shares its
			// batch; alone, its batch's deadline is its own, long past.
			want := int64(0)
			if patient {
				want = 1
			}
			batchIdle(t, b)
			if got := rdb.Exists(ctx, key).Val(); got != want {
				t.Errorf("the given-up call's key exists: %d, want %d", got, want)
			}
			if err := <-batchDo(ctx, b, "ping"); err != nil {
				t.Fatalf("a call after the batches: %v", err)
			}
			g.mu.Lock()
			defer g.mu.Unlock()
			// The client's pipelines include the release batcher's (the
			// warm-up's held release, alone or carried by the first).
			if patient && !slices.Contains(g.batches[1:], 2) {
				t.Errorf("pipelines of %v commands; want the two calls that queued behind the first in one", g.batches)
			}
		})
	}
}

// echoGate holds every pipeline that has an `ECHO hold` in it until the
// test lets one go (release), and counts those it holds.
type echoGate struct {
	release chan struct{}
	held    atomic.Int32
}

func (g *echoGate) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (g *echoGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (g *echoGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if a := c.Args(); len(a) == 2 && a[0] == "echo" && a[1] == "hold" {
				g.held.Add(1)
				select {
				case <-g.release:
				case <-ctx.Done():
					return ctx.Err()
				}
				break
			}
		}
		return next(ctx, cmds)
	}
}

// TestBatchWaitNotPastItsDeadline: a call whose wait ends while the batch
// it is in hangs on its way to Redis returns at its own deadline, though
// other calls in that batch wait longer: the batch is sent by the caller
// with the latest deadline, or on a goroutine of its own, never by one
// whose wait ends first.
func TestBatchWaitNotPastItsDeadline(t *testing.T) {
	for _, gone := range []bool{false, true} {
		t.Run(fmt.Sprintf("patient caller gone=%v", gone), func(t *testing.T) {
			rdb, l, ctx := warmLocker(t, servertest.Unique("lptest-"))
			g := &echoGate{release: make(chan struct{})}
			rdb.AddHook(g)
			b := &l.acquires
			long, cancelLong := context.WithTimeout(ctx, 20*time.Second)
			defer cancelLong()
			first := batchDo(long, b, "echo", "hold")
			testbed.Eventually(t, 10*time.Second, "the first pipeline held", func() bool { return g.held.Load() == 1 })
			short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancelShort()
			impatient := batchDo(short, b, "ping")
			batchQueued(t, b, 1)
			patientCtx, cancelPatient := context.WithTimeout(ctx, 20*time.Second)
			defer cancelPatient()
			patient := batchDo(patientCtx, b, "echo", "hold")
			batchQueued(t, b, 2)
			if gone {
				cancelPatient()
				if err := <-patient; !errors.Is(err, context.Canceled) {
					t.Fatalf("the patient call, its context cancelled: %v", err)
				}
			}
			g.release <- struct{}{} // the first batch goes; the second hangs
			if err := <-first; err != nil {
				t.Fatal(err)
			}
			testbed.Eventually(t, 10*time.Second, "the second pipeline held", func() bool { return g.held.Load() == 2 })
			select {
			case err := <-impatient:
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("the impatient call: %v; want its deadline", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the impatient call still waits past its deadline, in a batch held on its way")
			}
			g.release <- struct{}{}
			if !gone {
				if err := <-patient; err != nil {
					t.Fatalf("the patient call: %v", err)
				}
			}
			batchIdle(t, b)
		})
	}
}

// batchDo makes one call of cmd through b on a goroutine of its own and
// returns where its error comes.
func batchDo(ctx context.Context, b *batcher, cmd ...any) chan error {
	done := make(chan error, 1)
	go func() {
		_, err := b.do(ctx, func(p redis.Pipeliner) []*redis.Cmd { return []*redis.Cmd{p.Do(ctx, cmd...)} })
		done <- err
	}()
	return done
}

// batchQueued waits until n calls are queued in b for its next batch.
func batchQueued(t *testing.T, b *batcher, n int) {
	t.Helper()
	testbed.Eventually(t, 10*time.Second, fmt.Sprintf("%d calls queued", n), func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.pending) == n
	})
}

// batchIdle waits until b has no batch on its way.
func batchIdle(t *testing.T, b *batcher) {
	t.Helper()
	testbed.Eventually(t, 5*time.Second, "the batcher idle", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return !b.busy
	})
}
