package main

import (
	"io"
	"testing"
	"time"
)

func TestOutputs(t *testing.T) {
	out, csv := outputs("/r", flags{})
	if out != "/r/bench/SOAK.md" || csv != "/r/bench/results/soak.csv" {
		t.Errorf("defaults = %s %s", out, csv)
	}
	out, csv = outputs("/r", flags{out: "/tmp/x.md"})
	if out != "/tmp/x.md" || csv != "/tmp/x.csv" {
		t.Errorf("with -out = %s %s", out, csv)
	}
	if _, csv = outputs("/r", flags{out: "/tmp/x.md", csv: "/tmp/y.csv"}); csv != "/tmp/y.csv" {
		t.Errorf("with -csv = %s", csv)
	}
}

func TestParseFlags(t *testing.T) {
	if _, err := parseFlags([]string{"-duration", "0s"}, io.Discard); err == nil {
		t.Error("want an error for -duration 0s")
	}
	if _, err := parseFlags([]string{"extra"}, io.Discard); err == nil {
		t.Error("want an error for a positional argument")
	}
	f, err := parseFlags(nil, io.Discard)
	if err != nil || f.duration != 30*time.Minute || f.warmup != 2*time.Minute || f.sample != 10*time.Second {
		t.Errorf("defaults = %+v, %v", f, err)
	}
}
