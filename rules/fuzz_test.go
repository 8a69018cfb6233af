package rules

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/lockproxy/lockproxy/parser"
)

// FuzzLoad feeds arbitrary bytes to the loader: it must never panic, and
// must return either a config or a *ValidationError, never both or neither.
func FuzzLoad(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/config/*.yaml")
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("a: &a [*a, *a]\nb: *a\n"))
	f.Add([]byte("rules: [&r {name: x, table: t, key: [id]}, *r, {<<: *r, name: y}]\n"))
	f.Add([]byte("users: [{user: ${A:-}}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := load("fuzz.yaml", data, testEnv, "")
		if (cfg == nil) == (err == nil) {
			t.Fatalf("load returned config %v and error %v", cfg != nil, err)
		}
		if err != nil {
			if _, ok := err.(*ValidationError); !ok {
				t.Fatalf("error %T is not a *ValidationError: %v", err, err)
			}
			_ = err.Error()
			return
		}
		_ = cfg.String()
		if _, err := Compile(cfg, Schema{}); err != nil {
			t.Fatalf("a valid config does not compile: %v", err)
		}
	})
}

// FuzzNormalize feeds arbitrary literal bytes to Normalize for every kind
// of column: it must never panic, and a numeric key read back as a number
// must give itself (the key is canonical).
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"1001", " 1001", "1e3", "-0.0", "abc", "ß", "\xff", "2024-1-5", "9007199254740993", "1e999999"} {
		f.Add(s, uint8(0), uint8(0))
	}
	cols := []*Column{nil, colInt, colBig, colDec, colCI, colUCI, colBin, colNoPad, colVarbin, colBinary4, colDate,
		{Name: "f", DataType: "double"}, {Name: "y", DataType: "year"}, {Name: "u", DataType: "uuid"}, {Name: "e", DataType: "enum", Collation: "utf8mb4_general_ci"}}
	kinds := []parser.ValueKind{parser.ValueString, parser.ValueDecimal, parser.ValueHex, parser.ValueBit, parser.ValueInt, parser.ValueFloat}
	f.Fuzz(func(t *testing.T, s string, c, k uint8) {
		col := cols[int(c)%len(cols)]
		v := parser.Value{Kind: kinds[int(k)%len(kinds)], Str: s, Text: s}
		if v.Kind == parser.ValueInt {
			v.Int = int64(len(s)) - 5
		}
		if v.Kind == parser.ValueFloat {
			v.Float = float64(len(s)) / 3
		}
		for _, use := range []Use{Compare, Assign} {
			key, err := Normalize(col, v, use)
			if err != nil || col == nil {
				continue
			}
			if fam := family(col.DataType); fam == famInt || fam == famDecimal {
				again, err := Normalize(col, parser.Value{Kind: parser.ValueDecimal, Str: string(key), Text: string(key)}, Compare)
				if err == nil && string(again) != string(key) {
					t.Fatalf("key %q of %q is not canonical: gives %q", key, s, again)
				}
			}
		}
	})
}
