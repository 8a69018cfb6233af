package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Failed logins slow down password guessing, on two counts: per account
// and client address (guessing one account's password), and per client
// address alone (one password tried on many user names). Past the free
// failures within throttleWindow, each failure on a count holds one of
// its maxWaiting slots for a penalty that doubles up to maxLoginDelay,
// after the slot's previous penalty; while every slot of a count is held,
// attempts on it are refused at once (1129) before their password is
// checked. So a count is checked at most maxWaiting times per penalty,
// whoever hangs up, and nobody waits: a correct password is answered at
// once (a pool never times out on the throttle), a wrong one gets 1045 at
// once, and guesses past the slots get 1129. Counts live in an LRU of
// maxTracked entries, so the table stays bounded however many names are
// tried.
const (
	freeLogins     = 3  // per account and address
	freeHostLogins = 20 // per address, over every account
	throttleWindow = time.Minute
	baseLoginDelay = 100 * time.Millisecond
	maxLoginDelay  = 5 * time.Second
	maxWaiting     = 2
	maxTracked     = 20000
	maxKeyName     = 64 // longer user names are counted by their hash
	// trustedFor: an account that logged in from an address is exempt
	// from that address's own count for this long, so a spray from a
	// shared address does not slow the users who know their passwords.
	trustedFor = time.Hour
)

// loginThrottle counts recent failed logins. Safe for concurrent use.
type loginThrottle struct {
	mu   sync.Mutex
	keys *lru.Cache[string, *failures]
	now  func() time.Time
}

// failures is one count: recent failures, and until when each of its
// slots is held by a failure's penalty.
type failures struct {
	n    int
	last time.Time
	held [maxWaiting]time.Time
}

func newLoginThrottle() *loginThrottle {
	keys, err := lru.New[string, *failures](maxTracked)
	if err != nil { // only for a size < 1
		panic("proxy: " + err.Error())
	}
	return &loginThrottle{keys: keys, now: time.Now}
}

// count is one of the counts an attempt is on, and its free failures.
type count struct {
	key  string
	free int
}

// counts are the counts of an attempt by user from host: the account's,
// and the address's unless the account logged in from it lately.
func (t *loginThrottle) counts(user, host string, now time.Time) []count {
	cs := []count{{accountKey(user, host), freeLogins}, {"h:" + host, freeHostLogins}}
	if ok, found := t.keys.Get("ok:" + accountKey(user, host)); found && now.Sub(ok.last) < trustedFor {
		cs = cs[:1]
	}
	return cs
}

// loginTurn is an admitted attempt: the slot it holds on each of its
// throttled counts while its password is checked, so that parallel
// attempts on a count are checked maxWaiting at a time. End it with
// failed or succeeded; release frees what an attempt that ended otherwise
// still holds.
type loginTurn struct {
	slots map[string]int // count key → slot
}

// reserved is how long an admitted attempt may hold its slot if it never
// ends (a session that panicked).
const reserved = maxLoginDelay

// admit admits an attempt by user from host to have its password checked
// now, holding a free slot of each of its throttled counts; ok is false
// (and nothing is held) while every slot of one of them is held.
func (t *loginThrottle) admit(user, host string) (turn loginTurn, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	turn.slots = map[string]int{}
	for _, c := range t.counts(user, host, now) {
		f, _ := t.keys.Get(c.key)
		if !f.throttled(now, c.free) {
			continue
		}
		i := f.freeSlot(now)
		if i < 0 {
			t.releaseLocked(turn, now)
			return loginTurn{}, false
		}
		f.held[i] = now.Add(reserved)
		turn.slots[c.key] = i
	}
	return turn, true
}

// release frees the slots turn still holds (idempotent).
func (t *loginThrottle) release(turn loginTurn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.releaseLocked(turn, t.now())
}

func (t *loginThrottle) releaseLocked(turn loginTurn, now time.Time) {
	for k, i := range turn.slots {
		if f, ok := t.keys.Peek(k); ok {
			f.held[i] = now
		}
		delete(turn.slots, k)
	}
}

// throttled reports whether f's free failures are used up, so that
// attempts on it need a slot (f may be nil).
func (f *failures) throttled(now time.Time, free int) bool {
	return f != nil && now.Sub(f.last) <= throttleWindow && f.n >= free
}

// penalty is how long a failure past the free ones holds a slot.
func (f *failures) penalty(free int) time.Duration {
	return min(baseLoginDelay<<min(f.n-free-1, 6), maxLoginDelay)
}

// freeSlot is a slot of f not held at now, or -1.
func (f *failures) freeSlot(now time.Time) int {
	for i, h := range f.held {
		if !h.After(now) {
			return i
		}
	}
	return -1
}

// failed ends turn, a failed login by user from host, on both counts; on
// a throttled count the failure holds the slot that frees first for the
// count's penalty, after what it held before. It returns the longest
// penalty it applied.
func (t *loginThrottle) failed(user, host string, turn loginTurn) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.releaseLocked(turn, now) // the failure holds a slot for its penalty below
	var longest time.Duration
	for _, c := range []count{{accountKey(user, host), freeLogins}, {"h:" + host, freeHostLogins}} {
		f, ok := t.keys.Get(c.key)
		if !ok {
			f = &failures{}
			t.keys.Add(c.key, f)
		} else if now.Sub(f.last) > throttleWindow {
			f.n = 0
		}
		f.n++
		f.last = now
		if f.n <= c.free {
			continue
		}
		d := f.penalty(c.free)
		i := 0
		for j := range f.held {
			if f.held[j].Before(f.held[i]) {
				i = j
			}
		}
		f.held[i] = maxTime(f.held[i], now).Add(d)
		longest = max(longest, d)
	}
	return longest
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// succeeded ends turn and forgets the failures of user from host, and exempts it from
// the address's count for trustedFor. The address's count itself stays:
// one account that works must not clear the way for guesses at others.
func (t *loginThrottle) succeeded(user, host string, turn loginTurn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.releaseLocked(turn, t.now())
	t.keys.Add("ok:"+accountKey(user, host), &failures{last: t.now()})
	t.keys.Remove(accountKey(user, host))
}

// tracked is how many counts the table holds.
func (t *loginThrottle) tracked() int { return t.keys.Len() }

// accountKey names the count of user at host; long names are hashed so an
// entry stays small whatever a client sends.
func accountKey(user, host string) string {
	if len(user) > maxKeyName {
		sum := sha256.Sum256([]byte(user))
		user = "sha256:" + hex.EncodeToString(sum[:16])
	}
	return "a:" + user + "@" + host
}
