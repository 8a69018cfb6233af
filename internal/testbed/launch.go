package testbed

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// AwaitAdmin waits until a lockproxy process a test or benchmark started
// serves: until its admin endpoint admin ("host:port") answers 200 on path
// (/healthz, /readyz). It gives up when ctx ends, and as soon as gone
// reports the process ended or cannot serve (then with gone's error). It is
// the wait every launcher of the binary shares (e2e's instances, the
// benchmarks' StartProxy).
func AwaitAdmin(ctx context.Context, admin, path string, gone func() (bool, error)) error {
	client := &http.Client{Timeout: time.Second}
	pause := 10 * time.Millisecond
	var last error
	for {
		if gone != nil {
			if ended, err := gone(); ended {
				return fmt.Errorf("testbed: lockproxy on %s ended before it served: %w", admin, err)
			}
		}
		resp, err := client.Get("http://" + admin + path)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s answered %s", path, resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("testbed: lockproxy on %s does not serve: %w (%v)", admin, ctx.Err(), last)
		case <-time.After(pause):
		}
		pause = min(2*pause, 50*time.Millisecond)
	}
}
