package main

import (
	"fmt"
	"io"
	"strconv"
	"time"
)

// sleepFor is `lockproxy sleep DURATION`: it waits DURATION ("5s",
// "1m30s", or a bare number of seconds as sleep(1) takes) and exits 0.
// It is the Kubernetes preStop hook's delay in an image that has no
// sleep(1), such as lockproxy's distroless one: the pod's endpoints are
// removed meanwhile, then the kubelet sends SIGTERM and lockproxy drains.
func sleepFor(args []string, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: lockproxy sleep DURATION (5s, 1m, or seconds)")
		return 2
	}
	d, err := parseSleep(args[0])
	if err != nil {
		fmt.Fprintf(stderr, "lockproxy: sleep: %v\n", err)
		return 2
	}
	time.Sleep(d)
	return 0
}

// parseSleep reads a Go duration or a number of seconds; negative is an
// error.
func parseSleep(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		secs, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || secs != secs || secs > (1<<62)/float64(time.Second) {
			return 0, fmt.Errorf("%q is not a duration (5s, 1m) or a number of seconds", s)
		}
		d = time.Duration(secs * float64(time.Second))
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative", s)
	}
	return d, nil
}
