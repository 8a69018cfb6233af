package schemaword

import "sync"

// maxGap is the widest version jump Seen checks against the Locker's own
// announcements one by one; a wider one delivers.
const maxGap = 1024

// Follower turns the versions of a shared schema record into deliveries
// on C. Safe for concurrent use.
type Follower struct {
	id string
	c  chan struct{}

	mu    sync.Mutex
	known bool
	last  int64
	own   map[int64]bool // versions this Locker's announcements made, above last
}

// New returns a Follower for the Locker whose announcements carry id.
func New(id string) *Follower {
	return &Follower{id: id, c: make(chan struct{}, 1), own: make(map[int64]bool)}
}

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

// Own records that one of this Locker's announcements made version, for
// a backend that learns it from the write: two of its own announcements
// seen as one jump then deliver nothing. Recorded after Seen read past
// it, it is ignored (at worst a delivery the Locker did not need).
func (f *Follower) Own(version int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.known || version > f.last {
		f.own[version] = true
	}
}

// Seen records that the record has version (-1: it does not exist) and
// was last written by writer. The first version seen is the baseline and
// delivers nothing; after it, a higher version delivers unless every
// version up to it was made by this Locker (known from Own, or the last
// one by writer); a lower one (the record made again, or gone) delivers.
func (f *Follower) Seen(version int64, writer string) {
	f.mu.Lock()
	known, last := f.known, f.last
	f.known, f.last = true, version
	deliver := known && version != last && !f.allOwn(last, version, writer)
	for v := range f.own {
		// Before the baseline, last is no version at all: a baseline
		// read before this Locker's first announcements (-1, no record
		// yet) must keep them, or the next read takes them for another's.
		if v <= version || known && version < last {
			delete(f.own, v)
		}
	}
	f.mu.Unlock()
	if deliver {
		f.Signal()
	}
}

// allOwn reports whether every version after last up to version was made
// by this Locker. Called with mu held.
func (f *Follower) allOwn(last, version int64, writer string) bool {
	if version < last || version-last > maxGap {
		return false
	}
	for v := last + 1; v <= version; v++ {
		if !f.own[v] && !(v == version && writer == f.id) {
			return false
		}
	}
	return true
}
