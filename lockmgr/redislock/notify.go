package redislock

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproxy/lockproxy/lockmgr/internal/leasebook"
)

// notifier owns the Locker's one Pub/Sub connection: its wound channel,
// and the wake-up channels of keys that local heads wait for. Channels no
// one waits for are unsubscribed after idleUnsub.
type notifier struct {
	l  *Locker
	ps *redis.PubSub

	mu   sync.Mutex // guards subs and orders (UN)SUBSCRIBE writes
	subs map[string]*subscription
	done chan struct{}
	// schema gets a value when another Locker announced a schema change.
	schema chan struct{}
}

type subscription struct {
	key       string
	users     int
	idleSince time.Time
	confirmed chan struct{} // closed when the server confirmed it
}

const idleUnsub = 30 * time.Second

func newNotifier(l *Locker) *notifier {
	n := &notifier{l: l, subs: map[string]*subscription{}, done: make(chan struct{}), schema: make(chan struct{}, 1)}
	n.ps = l.rdb.Subscribe(l.ctx) // the wound channel is subscribed by New's warm-up
	ch := n.ps.ChannelWithSubscriptions(redis.WithChannelSize(1024))
	go n.dispatch(ch)
	return n
}

func (n *notifier) dispatch(ch <-chan interface{}) {
	defer close(n.done)
	wound, schema := n.l.woundChannel(), n.l.schemaChannel()
	for m := range ch {
		switch m := m.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				n.confirm(m.Channel)
			}
		case *redis.Message:
			if m.Channel == wound {
				// A wound (the ticket) or, NUL first, news of a waiter
				// that does not wound (acquire.lua): either way the
				// lease's release must not wait for a ride.
				tok, waiter := strings.CutPrefix(m.Payload, "\x00")
				if !waiter {
					n.l.book.WoundToken(tok)
				}
				n.l.wanted(tok)
			} else if m.Channel == schema {
				if m.Payload != n.l.id {
					select {
					case n.schema <- struct{}{}:
					default: // one is pending: the re-read covers both
					}
				}
			} else if key, ok := n.keyOf(m.Channel); ok {
				if fence, tok, ok := parseGrant(m.Payload); ok {
					// Redis granted the key to a ticket as it freed it
					// (release.lua); the lock is held, so only that
					// ticket's waiter, if it is ours, has news.
					n.l.granted(key, tok, leasebook.Grant{Fence: fence, Epoch: n.l.restart.dials.Load()})
				} else {
					n.l.book.WakeHead(key)
				}
			}
		}
	}
}

// parseGrant reads a grant announcement, 'g' fence ' ' ticket.
func parseGrant(payload string) (fence uint64, tok string, ok bool) {
	rest, ok := strings.CutPrefix(payload, "g")
	if !ok {
		return 0, "", false
	}
	f, tok, ok := strings.Cut(rest, " ")
	if !ok {
		return 0, "", false
	}
	fence, err := strconv.ParseUint(f, 10, 64)
	return fence, tok, err == nil && fence > 0
}

func (n *notifier) confirm(channel string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if s := n.subs[channel]; s != nil {
		select {
		case <-s.confirmed:
		default:
			close(s.confirmed)
		}
	}
}

func (n *notifier) keyOf(channel string) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.subs[channel]
	if s == nil {
		return "", false
	}
	return s.key, true
}

// subscribe makes sure channel (the wake-up channel of key) is subscribed
// and waits, up to OpTimeout, for the server to confirm it.
func (n *notifier) subscribe(ctx context.Context, channel, key string) error {
	n.mu.Lock()
	s := n.subs[channel]
	var err error
	if s == nil {
		s = &subscription{key: key, confirmed: make(chan struct{})}
		n.subs[channel] = s
		sctx, cancel := n.l.opCtx(ctx)
		err = n.ps.Subscribe(sctx, channel)
		cancel()
	}
	s.users++
	n.mu.Unlock()
	if err != nil {
		return err
	}
	t := time.NewTimer(n.l.opt.OpTimeout)
	defer t.Stop()
	select {
	case <-s.confirmed:
		return nil
	case <-t.C:
		return errors.New("redislock: subscription not confirmed in time")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// listening reports whether channel is subscribed and the server has
// confirmed it, so a message published on it now reaches this Locker
// (unless the connection breaks meanwhile).
func (n *notifier) listening(channel string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.subs[channel]
	if s == nil {
		return false
	}
	select {
	case <-s.confirmed:
		return true
	default:
		return false
	}
}

func (n *notifier) unsubscribe(channel string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if s := n.subs[channel]; s != nil {
		s.users--
		if s.users == 0 {
			s.idleSince = time.Now()
		}
	}
}

// sweep unsubscribes channels idle for idleUnsub.
func (n *notifier) sweep() {
	n.mu.Lock()
	defer n.mu.Unlock()
	var idle []string
	for ch, s := range n.subs {
		if s.users == 0 && time.Since(s.idleSince) > idleUnsub {
			idle = append(idle, ch)
			delete(n.subs, ch)
		}
	}
	if len(idle) > 0 {
		ctx, cancel := n.l.opCtx(context.Background())
		_ = n.ps.Unsubscribe(ctx, idle...)
		cancel()
	}
}

func (n *notifier) close() {
	_ = n.ps.Close()
	<-n.done
}
