package etcdlock

import (
	"strings"
	"testing"

	"github.com/lockproxy/lockproxy/lockmgr"
)

// TestDirsDisjoint: no key's directory is a prefix of another's, so a
// range read of one key never sees another key's entries.
func TestDirsDisjoint(t *testing.T) {
	l := &Locker{opt: (&Options{}).withDefaults()}
	for _, tc := range []struct{ a, b string }{
		{"a", "a/b"},
		{"a", "ab"},
		{"orders:1", "orders:10"},
		{"x/", "x"},
	} {
		t.Run(tc.a+"|"+tc.b, func(t *testing.T) {
			da, db := l.dir(tc.a), l.dir(tc.b)
			if strings.HasPrefix(da, db) || strings.HasPrefix(db, da) {
				t.Errorf("dir(%q) = %q and dir(%q) = %q overlap", tc.a, da, tc.b, db)
			}
		})
	}
}

func TestWoundKeyRoundTrip(t *testing.T) {
	l := &Locker{opt: (&Options{}).withDefaults()}
	for _, o := range []lockmgr.Owner{
		{Instance: "host:3307/ab", Session: 7, Txn: 9},
		{Instance: "plain", Session: 1, Txn: 1},
	} {
		t.Run(o.ID(), func(t *testing.T) {
			if got := woundedOwner(l.woundKey("locker", o.ID())); got != o.ID() {
				t.Errorf("woundedOwner(woundKey(%q)) = %q", o.ID(), got)
			}
		})
	}
}

func TestEntryOrder(t *testing.T) {
	e := entry{Owner: "b", Prio: 10}
	for _, tc := range []struct {
		prio int64
		id   string
		want bool
	}{
		{11, "a", true},
		{9, "z", false},
		{10, "c", true},
		{10, "a", false},
	} {
		t.Run(tc.id, func(t *testing.T) {
			if got := e.olderThan(tc.prio, tc.id); got != tc.want {
				t.Errorf("olderThan(%d, %q) = %v; want %v", tc.prio, tc.id, got, tc.want)
			}
		})
	}
}
