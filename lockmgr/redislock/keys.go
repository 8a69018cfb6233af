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
}

func (l *Locker) names(key string) names {
	tag := tagEscaper.Replace(key)
	if tag == "" {
		tag = "%" // an empty tag would hash each name apart; "%" is never an escape's output
	}
	base := l.opt.Prefix + ":{" + tag + "}"
	return names{
		lock:    base,
		queue:   base + ":q",
		expiry:  base + ":qx",
		fence:   base + ":fence",
		channel: base + ":wake",
		grants:  base + ":qg",
	}
}

// keys are the KEYS of the acquire and release scripts.
func (n names) keys() []string { return []string{n.lock, n.queue, n.expiry, n.fence, n.grants} }
