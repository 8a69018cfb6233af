package rules

import (
	"os"
	"path/filepath"
	"testing"
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
