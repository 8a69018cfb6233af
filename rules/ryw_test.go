package rules

import "testing"

func TestReadYourWritesDefault(t *testing.T) {
	for _, c := range []struct {
		yaml string
		want bool
	}{
		{"", true},
		{"  read_your_writes: true\n", true},
		{"  read_your_writes: false\n", false},
	} {
		cfg, err := LoadBytes("t.yaml", []byte("users: [{user: app, password: x}]\nbackends:\n  primary: 127.0.0.1:3306\n"+c.yaml))
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Backends.RYW(); got != c.want {
			t.Errorf("%q: RYW() = %v, want %v", c.yaml, got, c.want)
		}
	}
}
