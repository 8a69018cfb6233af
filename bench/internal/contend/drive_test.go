package contend

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

func TestRetryable(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{&mysql.MySQLError{Number: 1205}, true},
		{&mysql.MySQLError{Number: 1213}, true},
		{&mysql.MySQLError{Number: 1105}, false},
		{errors.New("1213"), false},
		{nil, false},
	} {
		t.Run("", func(t *testing.T) {
			if got := Retryable(tt.err); got != tt.want {
				t.Errorf("Retryable(%v) = %v", tt.err, got)
			}
		})
	}
}

func TestStatement(t *testing.T) {
	q, a := statement(false, "UPDATE t SET s = %d WHERE k = %d", []int64{5, 7})
	if q != "UPDATE t SET s = 5 WHERE k = 7" || a != nil {
		t.Errorf("text: %q %v", q, a)
	}
	q, a = statement(true, "UPDATE t SET s = %d WHERE k = %d", []int64{5, 7})
	if q != "UPDATE t SET s = ? WHERE k = ?" || len(a) != 2 || a[0] != int64(5) || a[1] != int64(7) {
		t.Errorf("prepared: %q %v", q, a)
	}
}

// scripted is an Op that answers per client from a script, then Done.
type scripted struct {
	mu    sync.Mutex
	calls map[int]int
	plan  func(client, call int) (Outcome, error)
}

func (s *scripted) op(_ context.Context, client int) (Outcome, error) {
	s.mu.Lock()
	n := s.calls[client]
	s.calls[client]++
	s.mu.Unlock()
	return s.plan(client, n)
}

func TestSale(t *testing.T) {
	s := &scripted{calls: map[int]int{}, plan: func(client, call int) (Outcome, error) {
		switch {
		case client == 0 && call == 0:
			return 0, &mysql.MySQLError{Number: 1213}
		case client == 0 && call == 1:
			return Conflict, nil
		case client == 1:
			return SoldOut, nil
		case client == 2:
			return 0, errors.New("boom")
		}
		return Done, nil
	}}
	r := Sale(context.Background(), 4, 10, s.op)
	if r.Clients != 4 || r.Done != 2 || r.SoldOut != 1 || r.Errors != 1 || r.Retries != 2 || r.Attempts != 6 {
		t.Errorf("Sale = %+v; want 4 clients, 2 done, 1 sold out, 1 error, 2 retries, 6 attempts", r)
	}
	if r.Latency.N != 2 || !strings.Contains(r.ErrorMsg, "1x boom") {
		t.Errorf("latency n %d, error %q", r.Latency.N, r.ErrorMsg)
	}
	if r.PerClient[0] != 1 || r.PerClient[1] != 0 || r.Fairness.Starved != 2 {
		t.Errorf("per client %v, fairness %+v", r.PerClient, r.Fairness)
	}
}

func TestSaleGivesUp(t *testing.T) {
	r := Sale(context.Background(), 1, 3, func(context.Context, int) (Outcome, error) { return Conflict, nil })
	if r.Done != 0 || r.Attempts != 3 || r.Errors != 1 || !strings.Contains(r.ErrorMsg, "gave up after 3") {
		t.Errorf("Sale with endless conflicts = %+v", r)
	}
}

func TestTimed(t *testing.T) {
	var mu sync.Mutex
	n := 0
	r := Timed(context.Background(), 3, 20*time.Millisecond, func(context.Context, int) (Outcome, error) {
		mu.Lock()
		n++
		mu.Unlock()
		time.Sleep(time.Millisecond)
		return Done, nil
	})
	if r.Done != n || r.Attempts != n || r.Done < 3 || r.Errors != 0 {
		t.Errorf("Timed = %+v with %d calls; want every call done, at least one per client", r, n)
	}
	if r.Latency.N != r.Done {
		t.Errorf("latency samples %d for %d done", r.Latency.N, r.Done)
	}
	stopped := Timed(context.Background(), 1, time.Hour, func(context.Context, int) (Outcome, error) { return 0, errors.New("down") })
	if stopped.Errors != 100 {
		t.Errorf("a failing client made %d errors before stopping, want 100", stopped.Errors)
	}
}
