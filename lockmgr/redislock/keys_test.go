package redislock

import (
	"strings"
	"testing"
)

// hashTag is the part of a key Redis Cluster hashes: the text between the
// first '{' and the next '}', when not empty; otherwise the whole key.
func hashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// FuzzNames: whatever bytes a row key holds (they come from SQL values),
// every Redis key and channel of its lock hashes to one cluster slot, and
// two different row keys never share a lock.
func FuzzNames(f *testing.F) {
	for _, s := range []string{"sku:1001", "", "{", "}", "{}", "a{b}c", "%7B", "%", "}{", "\x00\xff"} {
		f.Add(s, s+"x")
	}
	l := &Locker{opt: Options{Prefix: "lockproxy"}}
	f.Fuzz(func(t *testing.T, a, b string) {
		na := l.names(a)
		tag := hashTag(na.lock)
		if tag == na.lock {
			t.Fatalf("key %q: lock name %q has no hash tag", a, na.lock)
		}
		for _, n := range []string{na.queue, na.expiry, na.fence, na.channel, na.grants, na.notes} {
			if hashTag(n) != tag {
				t.Fatalf("key %q: %q and %q hash differently", a, na.lock, n)
			}
		}
		if a != b && l.names(b).lock == na.lock {
			t.Fatalf("keys %q and %q share the lock %q", a, b, na.lock)
		}
	})
}

// TestNames: the Redis names of a lock key, as every lockproxy instance
// sharing the Redis spells them.
func TestNames(t *testing.T) {
	l := &Locker{opt: Options{Prefix: "lp"}}
	for _, tc := range []struct {
		key  string
		want names
	}{
		{"sku:1", names{lock: "lp:{sku:1}", queue: "lp:{sku:1}:q", expiry: "lp:{sku:1}:qx", fence: "lp:{sku:1}:fence", channel: "lp:{sku:1}:wake", grants: "lp:{sku:1}:qg", notes: "lp:{sku:1}:o"}},
		{"", names{lock: "lp:{%}", queue: "lp:{%}:q", expiry: "lp:{%}:qx", fence: "lp:{%}:fence", channel: "lp:{%}:wake", grants: "lp:{%}:qg", notes: "lp:{%}:o"}},
		{"a{b}", names{lock: "lp:{a%7Bb%7D}", queue: "lp:{a%7Bb%7D}:q", expiry: "lp:{a%7Bb%7D}:qx", fence: "lp:{a%7Bb%7D}:fence", channel: "lp:{a%7Bb%7D}:wake", grants: "lp:{a%7Bb%7D}:qg", notes: "lp:{a%7Bb%7D}:o"}},
	} {
		t.Run(tc.key, func(t *testing.T) {
			if got := l.names(tc.key); got != tc.want {
				t.Fatalf("names(%q) = %+v, want %+v", tc.key, got, tc.want)
			}
		})
	}
}
