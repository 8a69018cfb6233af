package scenario

import (
	"context"
	"errors"
	"testing"

	"github.com/lockproxy/lockproxy/bench/internal/env"
	"github.com/lockproxy/lockproxy/bench/internal/results"
)

type fake string

func (f fake) Name() string    { return string(f) }
func (f fake) Summary() string { return "fake " + string(f) }
func (f fake) Run(context.Context, *env.Env, Options, *results.Result) error {
	return nil
}
func (f fake) Report(*results.Result, string, string) (string, error) { return "", nil }

func names(ss []Scenario) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name())
	}
	return out
}

func TestSelect(t *testing.T) {
	r := NewRegistry(fake("overhead"), fake("streaming"), fake("hotkey"))
	tests := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{"", []string{"overhead", "streaming", "hotkey"}, false},
		{"all", []string{"overhead", "streaming", "hotkey"}, false},
		{"hotkey,overhead", []string{"overhead", "hotkey"}, false},
		{" streaming , streaming ", []string{"streaming"}, false},
		{"overhead,nope", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := r.Select(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrUnknown) {
					t.Fatalf("err = %v, want ErrUnknown", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g := names(got); len(g) != len(tt.want) || (len(g) > 0 && g[0] != tt.want[0]) || g[len(g)-1] != tt.want[len(tt.want)-1] {
				t.Fatalf("Select(%q) = %v, want %v", tt.in, g, tt.want)
			}
		})
	}
}

func TestDuplicatePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("want a panic on a duplicate name")
		}
	}()
	NewRegistry(fake("a"), fake("a"))
}

func TestMode(t *testing.T) {
	if (Options{Quick: true}).Mode() != "quick" || (Options{}).Mode() != "full" {
		t.Fatal("Mode names wrong")
	}
}
