package redisrtt

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrMonitor is returned when MONITOR cannot be started or read.
var ErrMonitor = errors.New("redisrtt: monitor")

// Line is one command MONITOR reported: who sent it ("lua" for a command
// a script ran) and the command name in lower case.
type Line struct {
	Source  string
	Command string
	Args    string  // the rest of the line, for the marker
	At      float64 // when Redis ran it, Unix seconds (0 if unreadable)
}

// ParseMonitorLine reads `1700000000.123456 [0 127.0.0.1:5000] "set" "k" "v"`.
func ParseMonitorLine(s string) (Line, bool) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "+")
	open, close := strings.IndexByte(s, '['), strings.IndexByte(s, ']')
	if open < 0 || close < open {
		return Line{}, false
	}
	head := strings.Fields(s[open+1 : close])
	if len(head) != 2 {
		return Line{}, false
	}
	rest := strings.TrimSpace(s[close+1:])
	if !strings.HasPrefix(rest, `"`) {
		return Line{}, false
	}
	end := strings.IndexByte(rest[1:], '"')
	if end < 0 {
		return Line{}, false
	}
	at, _ := strconv.ParseFloat(strings.TrimSpace(s[:open]), 64)
	return Line{Source: head[1], Command: strings.ToLower(rest[1 : end+1]), Args: rest[end+2:], At: at}, true
}

// monitor is a running MONITOR connection collecting lines until stop.
type monitor struct {
	conn  net.Conn
	mu    sync.Mutex
	lines []Line
	done  chan error
}

func startMonitor(ctx context.Context, addr string) (*monitor, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMonitor, err)
	}
	br := bufio.NewReaderSize(c, 1<<16)
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("*1\r\n$7\r\nMONITOR\r\n")); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("%w: %v", ErrMonitor, err)
	}
	if l, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(l, "+OK") {
		_ = c.Close()
		return nil, fmt.Errorf("%w: MONITOR answered %q (%v)", ErrMonitor, l, err)
	}
	_ = c.SetDeadline(time.Time{})
	m := &monitor{conn: c, done: make(chan error, 1)}
	go m.read(br)
	return m, nil
}

func (m *monitor) read(br *bufio.Reader) {
	for {
		s, err := br.ReadString('\n')
		if err != nil {
			m.done <- err
			return
		}
		if l, ok := ParseMonitorLine(s); ok {
			m.mu.Lock()
			m.lines = append(m.lines, l)
			m.mu.Unlock()
		}
	}
}

// until waits for a line whose args contain marker, then stops and returns
// every line before it.
func (m *monitor) until(marker string, timeout time.Duration) ([]Line, string, error) {
	deadline := time.Now().Add(timeout)
	defer m.conn.Close()
	for time.Now().Before(deadline) {
		m.mu.Lock()
		for i, l := range m.lines {
			if strings.Contains(l.Args, marker) {
				out := append([]Line(nil), m.lines[:i]...)
				m.mu.Unlock()
				return out, l.Source, nil
			}
		}
		m.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	return nil, "", fmt.Errorf("%w: marker %s not seen in %s", ErrMonitor, marker, timeout)
}

// Span is the time from sending one statement to reading its answer,
// Unix seconds.
type Span struct{ From, To float64 }

// CountOnPath counts, like CountSent, the commands clients other than self
// sent themselves, but only those Redis ran inside one of spans (sorted,
// not overlapping): the ones a client waited for.
func CountOnPath(lines []Line, self string, spans []Span) Counts {
	c := Counts{}
	for _, l := range lines {
		if l.Source == "lua" || l.Source == self {
			continue
		}
		i := sort.Search(len(spans), func(i int) bool { return spans[i].To >= l.At })
		if i < len(spans) && spans[i].From <= l.At {
			c[l.Command]++
		}
	}
	return c
}

// CountSent counts the commands clients other than self sent themselves
// (a script's own commands left out), by command.
func CountSent(lines []Line, self string) Counts {
	c := Counts{}
	for _, l := range lines {
		if l.Source == "lua" || l.Source == self {
			continue
		}
		c[l.Command]++
	}
	return c
}
