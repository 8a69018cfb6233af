package rules

import (
	"bytes"
	"testing"
)

func TestEncodeKey(t *testing.T) {
	tests := []struct {
		name          string
		schema, table string
		values        []string
		want          string
	}{
		{"int", "shop", "sku_stock", []string{"1001"}, "shop.sku_stock/1001"},
		{"composite", "shop", "orders", []string{"7", "abc"}, "shop.orders/7/abc"},
		{"separators", "shop", "t", []string{"a/b", "c%d"}, "shop.t/a%2Fb/c%25d"},
		{"dot in value stays", "shop", "t", []string{"1.5"}, "shop.t/1.5"},
		{"dot in ident escaped", "a.b", "c", []string{"x"}, "a%2Eb.c/x"},
		{"space nul quote", "s", "t", []string{"a b\x00'\""}, "s.t/a%20b%00'\""},
		{"invalid utf8", "s", "t", []string{"\xff\xfe"}, "s.t/%FF%FE"},
		{"empty value", "s", "t", []string{""}, "s.t/"},
		{"two empty values", "s", "t", []string{"", ""}, "s.t//"},
		{"no values", "s", "t", nil, "s.t"},
		{"no schema", "", "t", []string{"1"}, ".t/1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vals := make([][]byte, len(tt.values))
			for i, v := range tt.values {
				vals[i] = []byte(v)
			}
			got := EncodeKey(tt.schema, tt.table, vals)
			if got != tt.want {
				t.Fatalf("EncodeKey = %q, want %q", got, tt.want)
			}
			s, tb, vs, err := DecodeKey(got)
			if err != nil || s != tt.schema || tb != tt.table || !equalValues(vs, vals) {
				t.Fatalf("DecodeKey(%q) = %q %q %q %v", got, s, tb, vs, err)
			}
		})
	}
}

func TestEncodeKeyDistinct(t *testing.T) {
	// Pairs that a naive join would confuse.
	pairs := [][2][]string{
		{{"a/b"}, {"a", "b"}},
		{{"a%2Fb"}, {"a/b"}},
		{{""}, {}},
		{{"a", ""}, {"a"}},
	}
	for _, p := range pairs {
		a := EncodeKey("s", "t", toBytes(p[0]))
		b := EncodeKey("s", "t", toBytes(p[1]))
		if a == b {
			t.Errorf("%q and %q both encode to %q", p[0], p[1], a)
		}
	}
	if EncodeKey("a.b", "c", nil) == EncodeKey("a", "b.c", nil) {
		t.Error("schema/table split is ambiguous")
	}
}

func TestDecodeKeyRejects(t *testing.T) {
	for _, k := range []string{"", "noDot", "a.b.c", "s.t/%4", "s.t/%zz", "s.t/%41", "s.t/a b", "s.t/%2e", "s%2E.t/%2E"} {
		t.Run(k, func(t *testing.T) {
			if _, _, _, err := DecodeKey(k); err == nil {
				t.Fatalf("DecodeKey(%q) accepted a non-canonical key", k)
			}
		})
	}
}

func toBytes(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

func equalValues(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// FuzzEncodeKey checks that DecodeKey inverts EncodeKey (so EncodeKey is
// injective) and that keys stay printable ASCII.
func FuzzEncodeKey(f *testing.F) {
	f.Add("shop", "sku", []byte("1001"), []byte("x/y"), uint8(2))
	f.Add("a.b", "", []byte{0, 0xff, '%'}, []byte{}, uint8(1))
	f.Add("", ".", []byte(""), []byte("/"), uint8(0))
	f.Fuzz(func(t *testing.T, schema, table string, v1, v2 []byte, n uint8) {
		vals := [][]byte{v1, v2, v1}[:n%4]
		if n%4 == 3 {
			vals = [][]byte{v1, v2, append([]byte(nil), v2...)}
		}
		key := EncodeKey(schema, table, vals)
		for i := 0; i < len(key); i++ {
			if key[i] <= ' ' || key[i] > '~' {
				t.Fatalf("key %q has unprintable byte at %d", key, i)
			}
		}
		s, tb, vs, err := DecodeKey(key)
		if err != nil {
			t.Fatalf("DecodeKey(%q): %v", key, err)
		}
		if s != schema || tb != table || !equalValues(vs, vals) {
			t.Fatalf("round trip of (%q, %q, %q) gave (%q, %q, %q)", schema, table, vals, s, tb, vs)
		}
	})
}
