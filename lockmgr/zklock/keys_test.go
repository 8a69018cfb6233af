package zklock

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

func TestNodeNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		prio int64
		n    uint64
		seq  int64
	}{
		{"now", 1795979186333708, 1, 0},
		{"zero start", math.MinInt64 / 2, 7, 42},
		{"extremes", math.MinInt64, math.MaxUint64, 9999999999},
		{"max", math.MaxInt64, 0, 2147483647},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := nodePrefix(tc.prio, "0123abcd", tc.n) + pad10(tc.seq)
			n, ok := parseNode(name)
			if !ok || n.prio != tc.prio || n.seq != tc.seq || n.locker != "0123abcd" || n.name != name {
				t.Fatalf("parseNode(%q) = %+v, %v", name, n, ok)
			}
		})
	}
}

// TestAgeFieldOrder: names sort like the ages they carry.
func TestAgeFieldOrder(t *testing.T) {
	ps := []int64{math.MinInt64, -5, -1, 0, 1, 1795979186333708, math.MaxInt64}
	for i := 1; i < len(ps); i++ {
		if a, b := ageField(ps[i-1]), ageField(ps[i]); a >= b {
			t.Errorf("ageField(%d) = %s >= ageField(%d) = %s", ps[i-1], a, ps[i], b)
		}
	}
}

func TestEscape(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"orders:42", "orders:42"},
		{"a/b", "a%2Fb"},
		{".", "%2E"},
		{"..", "%2E%2E"},
		{"é\x00", "%C3%A9%00"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if got := escape(tc.in); got != tc.want {
				t.Errorf("escape(%q) = %q; want %q", tc.in, got, tc.want)
			}
		})
	}
}

func pad10(seq int64) string {
	s := strconv.FormatInt(seq, 10)
	return strings.Repeat("0", max(0, 10-len(s))) + s
}

// FuzzParseNode: names read from ZooKeeper (written by any instance) never
// crash the parser, and every name this package makes parses back.
func FuzzParseNode(f *testing.F) {
	f.Add("lock-09223372036854775808-abcd-1-0000000001", int64(5), uint64(3), int64(12))
	f.Add("lock--x--", int64(-1), uint64(0), int64(0))
	f.Fuzz(func(t *testing.T, name string, prio int64, n uint64, seq int64) {
		_, _ = parseNode(name)
		if seq < 0 {
			seq = -(seq + 1)
		}
		seq %= 1e10
		made := nodePrefix(prio, "ff00", n) + pad10(seq)
		got, ok := parseNode(made)
		if !ok || got.prio != prio || got.seq != seq {
			t.Fatalf("parseNode(%q) = %+v, %v", made, got, ok)
		}
		if e := escape(name); strings.Contains(e, "/") || e == "." || e == ".." {
			t.Fatalf("escape(%q) = %q: not one znode name", name, e)
		}
	})
}
