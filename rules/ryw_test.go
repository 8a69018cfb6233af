package rules

import (
	"strings"
	"testing"
)

func TestReadYourWrites(t *testing.T) {
	for _, c := range []struct {
		yaml string
		want ReadYourWrites
		on   bool
	}{
		{"", RYWSession, true},
		{"  read_your_writes: true\n", RYWSession, true},
		{"  read_your_writes: false\n", RYWOff, false},
		{"  read_your_writes: session\n", RYWSession, true},
		{"  read_your_writes: user\n", RYWUser, true},
		{"  read_your_writes: \"global\"\n", RYWGlobal, true},
		{"  read_your_writes: off\n", RYWOff, false},
	} {
		cfg, err := LoadBytes("t.yaml", []byte("users: [{user: app, password: x}]\nbackends:\n  primary: 127.0.0.1:3306\n"+c.yaml))
		if err != nil {
			t.Fatalf("%q: %v", c.yaml, err)
		}
		if got := cfg.Backends.ReadYourWrites; got != c.want || cfg.Backends.RYW() != c.on {
			t.Errorf("%q: read_your_writes %q (on %v), want %q (on %v)", c.yaml, got, cfg.Backends.RYW(), c.want, c.on)
		}
	}
	_, err := LoadBytes("t.yaml", []byte("users: [{user: app, password: x}]\nbackends:\n  primary: 127.0.0.1:3306\n  read_your_writes: everyone\n"))
	if err == nil || !strings.Contains(err.Error(), "backends.read_your_writes") || !strings.Contains(err.Error(), `"everyone"`) {
		t.Errorf("read_your_writes: everyone: %v, want an error naming the key and the value", err)
	}
}
