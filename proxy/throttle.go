package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Failed logins slow down further attempts, as MySQL's connection_control
// does, on two counts: per account and client address (guessing one
// account's password), and per client address alone (one password tried
// on many user names). Past the free failures within throttleWindow, each
// attempt on a count is answered only after a delay that doubles up to
// maxLoginDelay, and attempts on one count take their turns one after the
// other: parallel guesses wait in line instead of all at once. At most
// maxWaiting attempts wait on a count; more are refused at once (1129).
// Counts live in an LRU of maxTracked entries, so the table stays bounded
// however many names are tried.
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

// failures is one count: recent failures, and the line of attempts
// waiting for their turn.
type failures struct {
	n       int
	last    time.Time
	next    time.Time // when the next waiting attempt may be answered
	waiting int
}

func newLoginThrottle() *loginThrottle {
	keys, err := lru.New[string, *failures](maxTracked)
	if err != nil { // only for a size < 1
		panic("proxy: " + err.Error())
	}
	return &loginThrottle{keys: keys, now: time.Now}
}

// loginTurn is an admitted attempt: wait before answering, then call done.
type loginTurn struct {
	wait time.Duration
	done func()
}

// admit lines an attempt by user from host up behind the attempts on its
// counts. It refuses (ok false) when maxWaiting attempts already wait on a
// count, or when the wait would exceed maxWait (the handshake would time
// out first).
func (t *loginThrottle) admit(user, host string, maxWait time.Duration) (turn loginTurn, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	var waiting []*failures
	var until time.Time
	counts := []struct {
		key  string
		free int
	}{{accountKey(user, host), freeLogins}, {"h:" + host, freeHostLogins}}
	if ok, found := t.keys.Get("ok:" + accountKey(user, host)); found && now.Sub(ok.last) < trustedFor {
		counts = counts[:1]
	}
	for _, k := range counts {
		f, _ := t.keys.Get(k.key)
		d := f.delay(now, k.free)
		if d == 0 {
			continue
		}
		if f.waiting >= maxWaiting {
			return loginTurn{}, false
		}
		at := f.next
		if at.Before(now) {
			at = now
		}
		at = at.Add(d)
		if at.After(until) {
			until = at
		}
		waiting = append(waiting, f)
	}
	wait := until.Sub(now)
	if wait > maxWait {
		return loginTurn{}, false
	}
	for _, f := range waiting {
		f.next = until
		f.waiting++
	}
	return loginTurn{wait: max(wait, 0), done: func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		for _, f := range waiting {
			f.waiting--
		}
	}}, true
}

// delay is how long the next attempt on f waits (f may be nil).
func (f *failures) delay(now time.Time, free int) time.Duration {
	if f == nil || now.Sub(f.last) > throttleWindow || f.n < free {
		return 0
	}
	return min(baseLoginDelay<<min(f.n-free, 6), maxLoginDelay)
}

// failed records a failed login by user from host on both counts.
func (t *loginThrottle) failed(user, host string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	for _, k := range []string{accountKey(user, host), "h:" + host} {
		f, ok := t.keys.Get(k)
		if !ok {
			f = &failures{}
			t.keys.Add(k, f)
		} else if now.Sub(f.last) > throttleWindow {
			f.n = 0
		}
		f.n++
		f.last = now
	}
}

// succeeded forgets the failures of user from host, and exempts it from
// the address's count for trustedFor. The address's count itself stays:
// one account that works must not clear the way for guesses at others.
func (t *loginThrottle) succeeded(user, host string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.keys.Add("ok:"+accountKey(user, host), &failures{last: t.now()})
	if f, ok := t.keys.Get(accountKey(user, host)); ok && f.waiting == 0 {
		t.keys.Remove(accountKey(user, host))
	} else if ok {
		f.n = 0
	}
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
