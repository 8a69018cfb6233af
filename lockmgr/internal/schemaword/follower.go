package schemaword

import "sync"

// Follower turns the versions of a shared schema record into deliveries
// on C. Safe for concurrent use.
type Follower struct {
	id string
	c  chan struct{}

	mu    sync.Mutex
	known bool
	last  int64
}

// New returns a Follower for the Locker whose announcements carry id.
func New(id string) *Follower { return &Follower{id: id, c: make(chan struct{}, 1)} }

// C delivers a value when another Locker announced a change (changes
// that come while one is pending are merged).
func (f *Follower) C() <-chan struct{} { return f.c }

// Signal delivers a change unconditionally: the Locker cannot tell
// whether it missed one (a watch history compacted away).
func (f *Follower) Signal() {
	select {
	case f.c <- struct{}{}:
	default: // one is pending: the re-read it causes covers this one too
	}
}

// Seen records that the record has version (-1: it does not exist) and
// was last written by writer. The first version seen is the baseline and
// delivers nothing; after it, a different version delivers unless it is
// exactly one announcement later and that announcement was this Locker's
// own.
func (f *Follower) Seen(version int64, writer string) {
	f.mu.Lock()
	known, last := f.known, f.last
	f.known, f.last = true, version
	f.mu.Unlock()
	if !known || version == last || (version == last+1 && writer == f.id) {
		return
	}
	f.Signal()
}
