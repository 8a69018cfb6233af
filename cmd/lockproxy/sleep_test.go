package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestParseSleep(t *testing.T) {
	cases := []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"5s", 5 * time.Second, ""},
		{"1m30s", 90 * time.Second, ""},
		{"5", 5 * time.Second, ""},
		{"0.25", 250 * time.Millisecond, ""},
		{"0", 0, ""},
		{"-1s", 0, "negative"},
		{"-2", 0, "negative"},
		{"five", 0, "not a duration"},
		{"NaN", 0, "not a duration"},
		{"1e30", 0, "not a duration"},
		{"", 0, "not a duration"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := parseSleep(c.in)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("parseSleep(%q) = %v, %v; want an error with %q", c.in, got, err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("parseSleep(%q) = %v, %v; want %v", c.in, got, err, c.want)
			}
		})
	}
}

// TestSleepCommand runs `lockproxy sleep` as the preStop hook does: it
// waits at least the duration and exits 0; a bad argument exits 2 with
// the usage or a lockproxy: message.
func TestSleepCommand(t *testing.T) {
	var out, errb bytes.Buffer
	start := time.Now()
	if code := run([]string{"sleep", "200ms"}, &out, &errb); code != 0 {
		t.Fatalf("sleep 200ms: exit %d, stderr %q", code, errb.String())
	}
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Errorf("sleep 200ms returned after %v", waited)
	}
	if out.Len()+errb.Len() != 0 {
		t.Errorf("sleep printed %q %q", out.String(), errb.String())
	}
	for _, args := range [][]string{{"sleep"}, {"sleep", "1s", "2s"}, {"sleep", "soon"}} {
		errb.Reset()
		if code := run(args, &out, &errb); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
		if e := errb.String(); !strings.HasPrefix(e, "usage: lockproxy sleep") && !strings.HasPrefix(e, "lockproxy: sleep:") {
			t.Errorf("%q: stderr %q is neither the usage nor a lockproxy: error", args, e)
		}
	}
}
