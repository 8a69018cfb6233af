package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		args  []string
		want  string
		quick bool
	}{
		{nil, "", false},
		{[]string{"-quick"}, "", true},
		{[]string{"-scenario=overhead,streaming"}, "overhead,streaming", false},
		{[]string{"-quick", "overhead", "streaming"}, ",overhead,streaming", true},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			f, err := parseFlags(tt.args, &bytes.Buffer{})
			if err != nil {
				t.Fatal(err)
			}
			if f.scenarios != tt.want || f.quick != tt.quick {
				t.Fatalf("parseFlags = %+v", f)
			}
			if _, err := registry().Select(strings.Trim(f.scenarios, ",")); err != nil {
				t.Fatalf("Select(%q): %v", f.scenarios, err)
			}
		})
	}
}

func TestRunListAndUnknown(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-list"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "overhead") || !strings.Contains(out.String(), "streaming") {
		t.Fatalf("-list: code %d, out %q", code, out.String())
	}
	if code := run([]string{"nosuch"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "unknown") {
		t.Fatalf("unknown scenario: code %d, stderr %q", code, errb.String())
	}
}
