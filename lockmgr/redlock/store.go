package redlock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/internal/grantscript"
	"github.com/lockproxy/lockproxy/lockmgr/internal/pollwait"
)

var (
	//go:embed release.lua
	releaseSrc string
	//go:embed renew.lua
	renewSrc string
	//go:embed queue.lua
	queueSrc string

	tryScript     = redis.NewScript(grantscript.Source)
	releaseScript = redis.NewScript(releaseSrc)
	renewScript   = redis.NewScript(renewSrc)
	queueScript   = redis.NewScript(queueSrc)
)

// store is N independent servers as one pollwait.Store: every call goes
// to all of them at once and a majority decides.
type store struct {
	srv    []redis.UniversalClient
	quorum int
	prefix string
	ttl    int64         // ms
	tkt    int64         // ticket ttl, ms
	op     time.Duration // bounds one round of calls
	fence  int64         // fence counter ttl, ms
}

func newStore(clients []redis.UniversalClient, opt Options, ticketTTL time.Duration) *store {
	return &store{
		srv: clients, quorum: len(clients)/2 + 1, prefix: opt.Prefix,
		op: opt.OpTimeout, ttl: opt.TTL.Milliseconds(), tkt: ticketTTL.Milliseconds(), fence: opt.FenceTTL.Milliseconds(),
	}
}

// tagEscaper keeps a user key from ending or opening a hash tag early.
var tagEscaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// names are the lock hash, wait queue, ticket expiry and fence counter of
// key, all under one hash tag.
func (s *store) names(key string) []string {
	tag := tagEscaper.Replace(key)
	base := s.prefix + ":{" + tag + "}"
	return []string{base, base + ":q", base + ":qx", base + ":fence"}
}

// each runs f on every server at once and waits for all; errs[i] is
// server i's error.
func (s *store) each(f func(i int, c redis.UniversalClient) error) []error {
	errs := make([]error, len(s.srv))
	var wg sync.WaitGroup
	for i, c := range s.srv {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(i, c)
		}()
	}
	wg.Wait()
	return errs
}

// enough reports whether at least a quorum of errs are nil; otherwise it
// returns an error wrapping lockmgr.ErrUnavailable naming what failed.
func (s *store) enough(what string, errs []error) error {
	ok := 0
	var failed []error
	for i, err := range errs {
		if err == nil {
			ok++
		} else {
			failed = append(failed, fmt.Errorf("server %d: %w", i, err))
		}
	}
	if ok >= s.quorum {
		return nil
	}
	return fmt.Errorf("%w: redlock: %s: %d of %d servers answered, %d needed: %w",
		lockmgr.ErrUnavailable, what, ok, len(errs), s.quorum, errors.Join(failed...))
}

// vote is one server's answer to the try script.
type vote struct {
	status int64 // 1 granted, 0 held, 2 older waiter first
	fence  uint64
	pttl   int64
	holder string
}

// answer is one server's reply to the try script.
type answer struct {
	i   int
	v   vote
	err error
}

// Try implements pollwait.Store. It returns as soon as a majority granted
// (a slow or hung server does not delay a grant); otherwise it waits for
// every server, bounded by ctx.
func (s *store) Try(ctx context.Context, r pollwait.Request) (pollwait.Result, error) {
	n := s.names(r.Key)
	// Calls still running after an early grant must land (a late grant
	// makes the lock survive one more server failure): they run on a
	// context that ctx's cancellation does not end, only its deadline.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	if d, ok := ctx.Deadline(); ok {
		cctx, cancel = context.WithDeadline(context.WithoutCancel(ctx), d)
	}
	ch := make(chan answer, len(s.srv))
	for i, c := range s.srv {
		go func() {
			// No wound channel (a wound is the flag renewal reads), always
			// queue, no local waiter's ticket to queue with a grant.
			raw, err := tryScript.Run(cctx, c, n, r.Tok, r.Owner.ID(), r.Owner.Priority(), s.ttl, s.tkt,
				"", "1", s.fence, "", 0).Slice()
			var v vote
			if err == nil {
				v, err = parseVote(raw)
			}
			ch <- answer{i: i, v: v, err: err}
		}()
	}
	var granted []int
	errs := make([]error, len(s.srv))
	out := pollwait.Result{Status: pollwait.Queued}
	for got := 1; got <= len(s.srv); got++ {
		a := <-ch
		if errs[a.i] = a.err; a.err != nil {
			continue
		}
		switch a.v.status {
		case 1:
			granted = append(granted, a.i)
			out.Fence = max(out.Fence, a.v.fence)
		case 0:
			out.Status, out.Holder = pollwait.Busy, a.v.holder
			if d := time.Duration(a.v.pttl) * time.Millisecond; d > 0 && (out.Remaining == 0 || d < out.Remaining) {
				out.Remaining = d
			}
		}
		if len(granted) >= s.quorum {
			go s.drain(r, n, ch, len(s.srv)-got, cancel)
			return pollwait.Result{Status: pollwait.Granted, Fence: out.Fence}, nil
		}
	}
	cancel()
	if len(granted) > 0 { // a minority: give it back, keep our place in the queues
		s.undo(r, n, granted)
	}
	if err := s.enough("acquire", errs); err != nil {
		return pollwait.Result{}, err
	}
	out.Fence = 0
	return out, nil
}

// drain reads the answers that arrive after a majority granted. A late
// grant is ours like the others (renewal and release go to every server);
// a late ticket is dropped.
func (s *store) drain(r pollwait.Request, n []string, ch <-chan answer, left int, cancel context.CancelFunc) {
	defer cancel()
	for range left {
		a := <-ch
		if a.err == nil && a.v.status != 1 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = releaseScript.Run(ctx, s.srv[a.i], n, r.Tok, 0, s.fence, "0").Err()
			cancel()
		}
	}
}

func parseVote(v []any) (vote, error) {
	var out vote
	var ok [3]bool
	if len(v) >= 3 {
		out.status, ok[0] = v[0].(int64)
		var f int64
		f, ok[1] = v[1].(int64)
		out.fence = uint64(f)
		out.pttl, ok[2] = v[2].(int64)
	}
	if !ok[0] || !ok[1] || !ok[2] {
		return vote{}, fmt.Errorf("redlock: try script returned %v", v)
	}
	if len(v) >= 4 {
		out.holder, _ = v[3].(string)
	}
	return out, nil
}

// undo gives back a minority grant on the servers in idx, keeping the
// ticket, on a fresh bounded context (best effort: it expires anyway).
func (s *store) undo(r pollwait.Request, n []string, idx []int) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, i := range idx {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if releaseScript.Run(ctx, s.srv[i], n, r.Tok, 0, s.fence, "1").Err() == nil {
				_ = queueScript.Run(ctx, s.srv[i], n[1:3], r.Tok, r.Owner.Priority(), s.tkt).Err()
			}
		}()
	}
	wg.Wait()
}

// Queue implements pollwait.Store.
func (s *store) Queue(ctx context.Context, r pollwait.Request) error {
	n := s.names(r.Key)
	errs := s.each(func(_ int, c redis.UniversalClient) error {
		return queueScript.Run(ctx, c, n[1:3], r.Tok, r.Owner.Priority(), s.tkt).Err()
	})
	return s.enough("queue", errs)
}

// Release implements pollwait.Store: compare-and-delete on every server,
// one pipeline each, raising the fence counters to the fences granted.
func (s *store) Release(ctx context.Context, tok string, keys []string, fences []uint64) error {
	errs := s.each(func(_ int, c redis.UniversalClient) error {
		return s.pipelined(ctx, c, func(p redis.Pipeliner) []*redis.Cmd {
			cmds := make([]*redis.Cmd, len(keys))
			for j, k := range keys {
				var f uint64
				if j < len(fences) {
					f = fences[j]
				}
				cmds[j] = releaseScript.EvalSha(ctx, p, s.names(k), tok, f, s.fence, "0")
			}
			return cmds
		})
	})
	return s.enough("release", errs)
}

// Leave implements pollwait.Store.
func (s *store) Leave(ctx context.Context, r pollwait.Request) error {
	return s.Release(ctx, r.Tok, []string{r.Key}, nil)
}

// Renew implements pollwait.Store: one pipeline per server; a key is
// renewed when a majority renewed it, lost when too many servers say it
// is not ours for a majority to remain.
func (s *store) Renew(ctx context.Context, held []pollwait.Held) ([]pollwait.RenewResult, error) {
	replies := make([][][]int64, len(s.srv)) // server -> held -> key -> reply
	errs := s.each(func(i int, c redis.UniversalClient) error {
		var cmds [][]*redis.Cmd
		err := s.pipelined(ctx, c, func(p redis.Pipeliner) []*redis.Cmd {
			cmds = make([][]*redis.Cmd, len(held))
			var all []*redis.Cmd
			for j, h := range held {
				restore := "0"
				if h.Valid {
					restore = "1"
				}
				for x, k := range h.Keys {
					var f uint64
					if x < len(h.Fences) {
						f = h.Fences[x]
					}
					cmd := renewScript.EvalSha(ctx, p, s.names(k)[:1], h.Tok, s.ttl,
						restore, h.Owner.ID(), h.Owner.Priority(), f)
					cmds[j] = append(cmds[j], cmd)
					all = append(all, cmd)
				}
			}
			return all
		})
		if err != nil {
			return err
		}
		replies[i] = make([][]int64, len(held))
		for j := range held {
			for _, cmd := range cmds[j] {
				v, err := cmd.Int64()
				if err != nil {
					return err
				}
				replies[i][j] = append(replies[i][j], v)
			}
		}
		return nil
	})
	if err := s.enough("renew", errs); err != nil {
		return nil, err
	}
	out := make([]pollwait.RenewResult, len(held))
	for j, h := range held {
		out[j] = s.tally(replies, errs, j, len(h.Keys))
	}
	return out, nil
}

// tally counts the renew replies for held j over the servers that answered.
func (s *store) tally(replies [][][]int64, errs []error, j, nkeys int) pollwait.RenewResult {
	res := pollwait.RenewResult{State: pollwait.Renewed}
	for k := range nkeys {
		renewed, notOurs := 0, 0
		for i := range s.srv {
			if errs[i] != nil {
				continue
			}
			switch replies[i][j][k] {
			case 3:
				renewed++
				res.Restored = true
			case 1:
				renewed++
			case 2:
				renewed++
				res.Wounded = true
			default:
				notOurs++
			}
		}
		switch {
		case notOurs > len(s.srv)-s.quorum:
			res.State = pollwait.Lost
		case renewed < s.quorum && res.State == pollwait.Renewed:
			res.State = pollwait.Unknown
		}
	}
	return res
}

// Wounded implements pollwait.Store: any server's wounded flag on a key
// still ours counts (a false alarm only rolls back a younger transaction).
func (s *store) Wounded(ctx context.Context, held []pollwait.Held) (bool, error) {
	var mu sync.Mutex
	wounded := false
	errs := s.each(func(_ int, c redis.UniversalClient) error {
		var cmds []*redis.SliceCmd
		var toks []string
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, h := range held {
				for _, k := range h.Keys {
					cmds = append(cmds, p.HMGet(ctx, s.names(k)[0], "tok", "wounded"))
					toks = append(toks, h.Tok)
				}
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		for i, cmd := range cmds {
			v := cmd.Val()
			if len(v) == 2 && v[0] == toks[i] && v[1] != nil {
				mu.Lock()
				wounded = true
				mu.Unlock()
			}
		}
		return nil
	})
	if wounded {
		return true, nil
	}
	return false, s.enough("wounded check", errs)
}

// pipelined runs the script calls queued by queue in one round trip,
// loading the scripts first if the server does not know them.
func (s *store) pipelined(ctx context.Context, c redis.UniversalClient, queue func(p redis.Pipeliner) []*redis.Cmd) error {
	for attempt := 0; ; attempt++ {
		var cmds []*redis.Cmd
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			cmds = queue(p)
			return nil
		})
		if attempt == 0 && err != nil && noScript(cmds) {
			for _, sc := range []*redis.Script{releaseScript, renewScript, observeScript} {
				if lerr := sc.Load(ctx, c).Err(); lerr != nil {
					return lerr
				}
			}
			continue
		}
		if err != nil && errors.Is(err, redis.Nil) {
			err = nil
		}
		return err
	}
}

func noScript(cmds []*redis.Cmd) bool {
	for _, c := range cmds {
		if c.Err() != nil && strings.HasPrefix(c.Err().Error(), "NOSCRIPT") {
			return true
		}
	}
	return false
}
