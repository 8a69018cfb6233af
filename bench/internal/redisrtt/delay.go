package redisrtt

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// delayRelay forwards TCP connections to a Redis server and, while its
// delay is set, holds every byte a client sends for that long before
// passing it on (replies pass at once): a Redis one delay further away.
// A statement's time through a lockproxy that reaches Redis through it
// grows by the delay once per Redis round trip its client waits for,
// which is how the client's path is measured without comparing clocks.
type delayRelay struct {
	ln    net.Listener
	to    string
	delay atomic.Int64 // nanoseconds

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// startDelayRelay listens on a loopback port and relays to addr, with no
// delay until set is called.
func startDelayRelay(addr string) (*delayRelay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &delayRelay{ln: ln, to: addr, conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

// Addr is the relay's address.
func (r *delayRelay) Addr() string { return r.ln.Addr().String() }

// set makes every request from now on wait d.
func (r *delayRelay) set(d time.Duration) { r.delay.Store(int64(d)) }

// Close stops the relay and ends its connections.
func (r *delayRelay) Close() {
	_ = r.ln.Close()
	r.mu.Lock()
	for c := range r.conns {
		_ = c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

func (r *delayRelay) track(cs ...net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conns == nil {
		return false
	}
	for _, c := range cs {
		r.conns[c] = struct{}{}
	}
	return true
}

func (r *delayRelay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			r.mu.Lock()
			defer r.mu.Unlock()
			for c := range r.conns {
				_ = c.Close()
			}
			r.conns = nil
			return
		}
		s, err := net.Dial("tcp", r.to)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !r.track(c, s) {
			_ = c.Close()
			_ = s.Close()
			return
		}
		r.wg.Add(2)
		go r.requests(c, s)
		go r.replies(s, c)
	}
}

// chunk is what one read from the client returned, due at the server at
// due.
type chunk struct {
	b   []byte
	due time.Time
}

// requests passes what the client sends to the server, each read held
// until the delay since it arrived has passed; reading goes on meanwhile,
// so pipelined requests keep their spacing.
func (r *delayRelay) requests(c, s net.Conn) {
	defer r.wg.Done()
	q := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ch := range q {
			if d := time.Until(ch.due); d > 0 {
				time.Sleep(d)
			}
			if _, err := s.Write(ch.b); err != nil {
				_ = c.Close()
				for range q {
				}
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			q <- chunk{b: append([]byte(nil), buf[:n]...), due: time.Now().Add(time.Duration(r.delay.Load()))}
		}
		if err != nil {
			break
		}
	}
	close(q)
	<-done
	_ = s.Close()
}

// replies passes what the server answers to the client at once.
func (r *delayRelay) replies(s, c net.Conn) {
	defer r.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	_ = c.Close()
}

// added measures what the delay d adds to one round trip through the
// relay, as the timers of this host keep it: the median time of n PINGs
// with d set less the median with none. It leaves the delay unset.
func (r *delayRelay) added(ctx context.Context, d time.Duration, n int) (time.Duration, error) {
	var dl net.Dialer
	c, err := dl.DialContext(ctx, "tcp", r.Addr())
	if err != nil {
		return 0, err
	}
	defer c.Close()
	rd := bufio.NewReader(c)
	median := func(delay time.Duration) (time.Duration, error) {
		r.set(delay)
		defer r.set(0)
		ts := make([]time.Duration, 0, n)
		for range n {
			start := time.Now()
			if _, err := c.Write([]byte("PING\r\n")); err != nil {
				return 0, err
			}
			line, err := rd.ReadString('\n')
			if err != nil {
				return 0, err
			}
			if line != "+PONG\r\n" {
				return 0, fmt.Errorf("redisrtt: PING through the delay relay: %q", line)
			}
			ts = append(ts, time.Since(start))
		}
		sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
		return ts[len(ts)/2], nil
	}
	near, err := median(0)
	if err != nil {
		return 0, err
	}
	far, err := median(d)
	if err != nil {
		return 0, err
	}
	return far - near, nil
}
