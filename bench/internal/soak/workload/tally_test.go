package workload

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

func TestErrCode(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{&mysql.MySQLError{Number: 1205}, "1205"},
		{fmt.Errorf("wrapped: %w", &mysql.MySQLError{Number: 1213}), "1213"},
		{mysql.ErrInvalidConn, "bad-connection"},
		{fmt.Errorf("%w: short", errCheck), "check"},
		{io.EOF, "other"},
		{errors.New("x"), "other"},
	}
	for _, tt := range tests {
		if got := ErrCode(tt.err); got != tt.want {
			t.Errorf("ErrCode(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
	if n := Unexpected(map[string]int64{"1205": 5, "1213": 2, "1105": 1, "check": 2}); n != 3 {
		t.Errorf("Unexpected = %d, want 3", n)
	}
}

func TestRelease(t *testing.T) {
	tl := NewTally()
	for _, d := range []time.Duration{time.Second, 7 * time.Second, 2 * time.Second} {
		tl.release(d)
	}
	if tl.SlowReleases() != 1 || tl.MaxRelease() != 7*time.Second {
		t.Errorf("slow %d, max %s; want 1, 7s", tl.SlowReleases(), tl.MaxRelease())
	}
}
