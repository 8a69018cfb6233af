package etcdlock

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/lockproxy/lockproxy/lockmgr"
)

// entry is the value of a waiter's or holder's key.
type entry struct {
	Owner  string `json:"o"`
	Prio   int64  `json:"p"`
	Locker string `json:"l"`
	TTLms  int64  `json:"t"`
}

func newEntry(o lockmgr.Owner, locker string, ttlMs int64) string {
	b, _ := json.Marshal(entry{Owner: o.ID(), Prio: o.Priority(), Locker: locker, TTLms: ttlMs})
	return string(b)
}

func parseEntry(v []byte) (entry, error) {
	var e entry
	if err := json.Unmarshal(v, &e); err != nil {
		return e, fmt.Errorf("etcdlock: bad lock entry %q: %w", v, err)
	}
	return e, nil
}

// olderThan is lockmgr.Owner.Older on an entry: smaller priority, ties by id.
func (e entry) olderThan(prio int64, id string) bool {
	if e.Prio != prio {
		return e.Prio < prio
	}
	return e.Owner < id
}

// dir is the directory of key name's entries; it ends in a slash, and the
// escaping keeps one key's directory from being a prefix of another's.
func (l *Locker) dir(name string) string {
	return l.opt.Prefix + "/lock/" + url.PathEscape(name) + "/"
}

// woundDir is where other Lockers wound owners of Locker id.
func (l *Locker) woundDir(id string) string { return l.opt.Prefix + "/wound/" + id + "/" }

func (l *Locker) woundKey(lockerID, ownerID string) string {
	return l.woundDir(lockerID) + url.PathEscape(ownerID)
}

// woundedOwner is the owner id of a key under woundDir.
func woundedOwner(key string) string {
	s := key[strings.LastIndexByte(key, '/')+1:]
	if o, err := url.PathUnescape(s); err == nil {
		return o
	}
	return s
}
