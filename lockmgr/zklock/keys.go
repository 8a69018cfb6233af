package zklock

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/lockproxy/lockproxy/lockmgr"
)

// entry is the data of a lock znode.
type entry struct {
	Owner  string `json:"o"`
	Prio   int64  `json:"p"`
	Locker string `json:"l"`
}

func newEntry(o lockmgr.Owner, locker string) []byte {
	b, _ := json.Marshal(entry{Owner: o.ID(), Prio: o.Priority(), Locker: locker})
	return b
}

func parseEntry(v []byte) (entry, error) {
	var e entry
	if err := json.Unmarshal(v, &e); err != nil {
		return e, fmt.Errorf("zklock: bad lock znode data %q: %w", v, err)
	}
	return e, nil
}

// olderThan is lockmgr.Owner.Older on an entry.
func (e entry) olderThan(o lockmgr.Owner) bool {
	if p := o.Priority(); e.Prio != p {
		return e.Prio < p
	}
	return e.Owner < o.ID()
}

// escape makes a key name one znode name: no slash, only printable ASCII,
// never "." or "..".
func escape(name string) string {
	s := url.PathEscape(name)
	switch s {
	case ".", "..":
		s = strings.ReplaceAll(s, ".", "%2E")
	}
	return s
}

func (l *Locker) keyDir(name string) string { return l.opt.Root + "/locks/" + escape(name) }

func (l *Locker) woundDir(lockerID string) string { return l.opt.Root + "/wound/" + lockerID }

func (l *Locker) woundPath(lockerID, ownerID string) string {
	return l.woundDir(lockerID) + "/" + escape(ownerID)
}

// ageField is the owner's priority in fixed width, ordered like the int64.
func ageField(prio int64) string { return fmt.Sprintf("%020d", uint64(prio)^(1<<63)) }

// node is one lock znode name, parsed.
type node struct {
	name   string
	prio   int64
	locker string
	seq    int64
}

// nodePrefix is the name of a new lock znode before ZooKeeper's sequence:
// lock-<age>-<locker>-<n>- (unique per attempt).
func nodePrefix(prio int64, locker string, n uint64) string {
	return "lock-" + ageField(prio) + "-" + locker + "-" + strconv.FormatUint(n, 10) + "-"
}

// parseNode reads a lock znode name; ok false for foreign names.
func parseNode(name string) (node, bool) {
	parts := strings.Split(name, "-")
	if len(parts) != 5 || parts[0] != "lock" || len(parts[4]) < 10 {
		return node{}, false
	}
	age, err1 := strconv.ParseUint(parts[1], 10, 64)
	seq, err2 := strconv.ParseInt(parts[4], 10, 64)
	if err1 != nil || err2 != nil {
		return node{}, false
	}
	return node{name: name, prio: int64(age ^ (1 << 63)), locker: parts[2], seq: seq}, true
}
