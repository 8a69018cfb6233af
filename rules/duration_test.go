package rules

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
)

func TestDurationYAML(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"d: 2s", 2 * time.Second, true},
		{"d: 150ms", 150 * time.Millisecond, true},
		{`d: "1m30s"`, 90 * time.Second, true},
		{"d: 0", 0, true},
		{"d: -1s", 0, false},
		{"d: soon", 0, false},
		{"d: 5", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var v struct {
				D Duration `yaml:"d"`
			}
			err := yaml.Unmarshal([]byte(tt.in), &v)
			if (err == nil) != tt.ok || (tt.ok && v.D.D() != tt.want) {
				t.Fatalf("got %v, %v; want %v ok=%v", v.D, err, tt.want, tt.ok)
			}
		})
	}
	out, err := yaml.Marshal(struct {
		D Duration `yaml:"d"`
	}{Duration(1500 * time.Millisecond)})
	if err != nil || string(out) != "d: 1.5s\n" {
		t.Fatalf("Marshal = %q, %v", out, err)
	}
}

func TestRedisConfigString(t *testing.T) {
	s := fmt.Sprint(RedisConfig{Addrs: []string{"127.0.0.1:6379"}, Password: "hunter2"})
	if !strings.Contains(s, "password:<redacted>") || strings.Contains(s, "hunter2") {
		t.Fatalf("%s", s)
	}
}
