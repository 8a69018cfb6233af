package redislock

import "strings"

// tagEscaper keeps a user key from ending or opening a hash tag early, so
// every Redis key and channel of one lock hashes to the same cluster slot.
var tagEscaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// names are the Redis keys and channel of one lock key; all share the hash
// tag {escaped key}.
type names struct {
	lock, queue, expiry, fence, channel string
	// grants holds, per queued ticket, what a release needs to grant the
	// key to it (see release.lua).
	grants string
	// notes holds observe mode's notes on the key (see observe.go).
	notes string
}

func (l *Locker) names(key string) names {
	tag := tagEscaper.Replace(key)
	if tag == "" {
		tag = "%" // an empty tag would hash each name apart; "%" is never an escape's output
	}
	// The seven names are cut from one string: one allocation per lock
	// key instead of seven, twice per guarded statement (acquire and
	// release).
	var b strings.Builder
	base := len(l.opt.Prefix) + len(tag) + 3
	b.Grow(7*base + len(":q:qx:fence:wake:qg:o"))
	ends := [7]int{}
	for i, suffix := range [7]string{"", ":q", ":qx", ":fence", ":wake", ":qg", ":o"} {
		b.WriteString(l.opt.Prefix)
		b.WriteString(":{")
		b.WriteString(tag)
		b.WriteString("}")
		b.WriteString(suffix)
		ends[i] = b.Len()
	}
	all := b.String()
	return names{
		lock:    all[:ends[0]],
		queue:   all[ends[0]:ends[1]],
		expiry:  all[ends[1]:ends[2]],
		fence:   all[ends[2]:ends[3]],
		channel: all[ends[3]:ends[4]],
		grants:  all[ends[4]:ends[5]],
		notes:   all[ends[5]:ends[6]],
	}
}

// keys are the KEYS of the acquire and release scripts.
func (n names) keys() []string { return []string{n.lock, n.queue, n.expiry, n.fence, n.grants} }
