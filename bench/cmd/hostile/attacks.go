package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	perrors "github.com/pingcap/errors"
)

// counters of one attack: attempts, and answers by kind.
type counters struct {
	name     string
	attempts atomic.Int64
	mu       sync.Mutex
	codes    map[string]int64
}

func (c *counters) note(code string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.codes == nil {
		c.codes = map[string]int64{}
	}
	c.codes[code]++
}

func (c *counters) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []string
	for k, v := range c.codes {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
	}
	return fmt.Sprintf("%-14s attempts=%-7d %s", c.name, c.attempts.Load(), strings.Join(parts, " "))
}

// codeOf names an outcome by its MySQL error code ("ok" when none).
func codeOf(err error) string {
	if err == nil {
		return "ok"
	}
	var me *mysql.MyError
	if errors.As(err, &me) || errors.As(perrors.Cause(err), &me) {
		return fmt.Sprint(me.Code)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	return "io"
}

// dialFrom dials addr from a loopback source address, as another host would.
func dialFrom(ctx context.Context, src, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	return d.DialContext(ctx, "tcp", addr)
}

// loop runs fn in n goroutines until ctx ends.
func loop(ctx context.Context, wg *sync.WaitGroup, n int, fn func(ctx context.Context, i int)) {
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for ctx.Err() == nil {
				fn(ctx, i)
			}
		}(i)
	}
}

// hugeHeaders: connections that answer the greeting with a header
// announcing a 16 MiB packet and 24 KB of it.
func hugeHeaders(ctx context.Context, wg *sync.WaitGroup, t *target, c *counters) {
	body := append([]byte{0xff, 0xff, 0xff, 1}, bytes.Repeat([]byte{'A'}, 24<<10)...)
	loop(ctx, wg, 40, func(ctx context.Context, _ int) {
		conn, err := dialFrom(ctx, "127.0.0.5", t.addr)
		if err != nil {
			c.note("dial")
			time.Sleep(50 * time.Millisecond)
			return
		}
		defer conn.Close()
		c.attempts.Add(1)
		_ = conn.SetDeadline(time.Now().Add(15 * time.Second))
		greet := make([]byte, 4096)
		_, _ = conn.Read(greet)
		_, _ = conn.Write(body)
		// A timeout means the proxy held the connection; EOF or a reset
		// (it closed with the rest unread) that it refused it.
		var ne net.Error
		if _, err := io.Copy(io.Discard, conn); errors.As(err, &ne) && ne.Timeout() {
			c.note("held")
		} else {
			c.note("closed")
		}
	})
}

// idleFlood keeps n sockets open that never answer the greeting.
func idleFlood(ctx context.Context, wg *sync.WaitGroup, t *target, c *counters, n int) {
	loop(ctx, wg, n, func(ctx context.Context, i int) {
		conn, err := dialFrom(ctx, "127.0.0.4", t.addr)
		if err != nil {
			c.note("dial")
			time.Sleep(100 * time.Millisecond)
			return
		}
		defer conn.Close()
		c.attempts.Add(1)
		go func() { <-ctx.Done(); _ = conn.Close() }()
		_, _ = io.Copy(io.Discard, conn) // until the proxy closes it
		c.note("closed")
	})
}

// attacker logs in as the real user.
func attacker(t *target) (*client.Conn, error) {
	return client.ConnectWithTimeout(t.addr, t.bed.User, t.bed.Password, saleDB, 10*time.Second)
}

// bigStatements sends oversized, deeply nested and merely large
// statements.
func bigStatements(ctx context.Context, wg *sync.WaitGroup, t *target, c *counters) {
	nested := "SELECT " + strings.Repeat("(SELECT ", 400_000) + "1" + strings.Repeat(")", 400_000)
	deep := "SELECT stock FROM sku WHERE sku_id = " + strings.Repeat("(", 900_000) + "1" + strings.Repeat(")", 900_000)
	var in strings.Builder
	in.WriteString("SELECT stock FROM sku WHERE sku_id IN (1")
	for i := 0; in.Len() < 1_500_000; i++ {
		fmt.Fprintf(&in, ",%d", 100000+i)
	}
	in.WriteString(")")
	texts := []string{nested, deep, in.String()}
	loop(ctx, wg, 2, func(ctx context.Context, i int) {
		conn, err := attacker(t)
		if err != nil {
			c.note("login")
			time.Sleep(time.Second)
			return
		}
		defer conn.Close()
		for k := i; ctx.Err() == nil; k++ {
			c.attempts.Add(1)
			_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
			_, err := conn.Execute(texts[k%len(texts)])
			c.note(codeOf(err))
			if codeOf(err) == "io" || codeOf(err) == "timeout" {
				return
			}
		}
	})
}

// longData sends long data for parameters the statement does not have.
func longData(ctx context.Context, wg *sync.WaitGroup, t *target, c *counters) {
	chunk := bytes.Repeat([]byte{'9'}, 64<<10)
	loop(ctx, wg, 2, func(ctx context.Context, _ int) {
		conn, err := attacker(t)
		if err != nil {
			c.note("login")
			time.Sleep(time.Second)
			return
		}
		defer conn.Close()
		st, err := conn.Prepare("SELECT stock FROM sku WHERE sku_id = ?")
		if err != nil {
			c.note(codeOf(err))
			return
		}
		for ctx.Err() == nil {
			for param := 1; param < 2000 && ctx.Err() == nil; param++ {
				p := binary.LittleEndian.AppendUint32([]byte{mysql.COM_STMT_SEND_LONG_DATA}, st.ID)
				p = binary.LittleEndian.AppendUint16(p, uint16(param))
				conn.ResetSequence()
				if err := conn.WritePacket(append(append(make([]byte, 4), p...), chunk...)); err != nil {
					c.note("io")
					return
				}
				c.attempts.Add(1)
			}
			conn.ResetSequence()
			reset := binary.LittleEndian.AppendUint32([]byte{mysql.COM_STMT_RESET}, st.ID)
			if err := conn.WritePacket(append(make([]byte, 4), reset...)); err != nil {
				return
			}
			if _, err := conn.ReadPacket(); err != nil {
				c.note("io")
				return
			}
			_, err := st.Execute(999)
			c.note(codeOf(err))
		}
	})
}

// preparedHoard keeps hundreds of prepared UPDATEs with long texts open
// per session and executes them.
func preparedHoard(ctx context.Context, wg *sync.WaitGroup, t *target, c *counters) {
	var pad strings.Builder
	for i := 0; pad.Len() < 109_000; i++ {
		fmt.Fprintf(&pad, ",%d", 200000+i)
	}
	loop(ctx, wg, 4, func(ctx context.Context, i int) {
		conn, err := attacker(t)
		if err != nil {
			c.note("login")
			time.Sleep(time.Second)
			return
		}
		defer conn.Close()
		var stmts []*client.Stmt
		for k := 0; k < 150 && ctx.Err() == nil; k++ {
			q := fmt.Sprintf("UPDATE sku SET stock = stock WHERE sku_id = ? AND sku_id NOT IN (%d%s)", k, pad.String())
			st, err := conn.Prepare(q)
			c.attempts.Add(1)
			c.note("prepare-" + codeOf(err))
			if err != nil {
				if codeOf(err) == "io" {
					return
				}
				continue
			}
			stmts = append(stmts, st)
		}
		for ctx.Err() == nil && len(stmts) > 0 {
			_, err := stmts[rand.Intn(len(stmts))].Execute(999)
			c.attempts.Add(1)
			c.note("execute-" + codeOf(err))
			if codeOf(err) == "io" {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// guesses tries passwords for the real account from 127.0.0.2, in
// parallel, and one password over many user names from 127.0.0.3.
func guesses(ctx context.Context, wg *sync.WaitGroup, t *target, brute, spray *counters) {
	try := func(c *counters, src, user, pw string) {
		dial := func(ctx context.Context, network, addr string) (net.Conn, error) { return dialFrom(ctx, src, addr) }
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		conn, err := client.ConnectWithDialer(cctx, "tcp", t.addr, user, pw, "", dial)
		c.attempts.Add(1)
		c.note(codeOf(err))
		if err == nil {
			_ = conn.Close()
		}
	}
	loop(ctx, wg, 100, func(ctx context.Context, i int) {
		try(brute, "127.0.0.2", t.bed.User, fmt.Sprintf("guess-%d-%d", i, rand.Int()))
	})
	loop(ctx, wg, 20, func(ctx context.Context, i int) {
		try(spray, "127.0.0.3", fmt.Sprintf("user%d-%d", i, rand.Intn(1_000_000)), "Summer2026!")
	})
}

// garbage sends arbitrary command packets after login.
func garbage(ctx context.Context, wg *sync.WaitGroup, t *target, c *counters) {
	loop(ctx, wg, 2, func(ctx context.Context, i int) {
		conn, err := attacker(t)
		if err != nil {
			c.note("login")
			time.Sleep(time.Second)
			return
		}
		defer conn.Close()
		rng := rand.New(rand.NewSource(time.Now().UnixNano() + int64(i)))
		// Pipelined answers carry sequence ids the client's reader
		// rejects: read them raw.
		raw := bufio.NewReader(conn.Conn.Conn)
		for ctx.Err() == nil {
			cmd := byte(rng.Intn(0x20))
			if cmd == mysql.COM_QUERY || cmd == mysql.COM_PROCESS_KILL || cmd == mysql.COM_QUIT || cmd == mysql.COM_CHANGE_USER {
				continue
			}
			body := make([]byte, rng.Intn(64))
			rng.Read(body)
			if len(body) >= 4 && rng.Intn(2) == 0 {
				binary.LittleEndian.PutUint32(body, uint32(rng.Intn(4)))
			}
			c.attempts.Add(1)
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := conn.Conn.Conn.Write(framed(append([]byte{cmd}, body...))); err != nil {
				c.note("io")
				return
			}
			if _, err := conn.Conn.Conn.Write(framed(append([]byte{mysql.COM_QUERY}, "SELECT 'hostile-sentinel'"...))); err != nil {
				c.note("io")
				return
			}
			if !readUntilSentinel(raw) {
				c.note("dropped")
				return
			}
			c.note("served")
		}
	})
}

// framed makes a command packet (sequence 0).
func framed(p []byte) []byte {
	return append([]byte{byte(len(p)), byte(len(p) >> 8), byte(len(p) >> 16), 0}, p...)
}

// readPacket reads one raw packet's payload.
func readPacket(r *bufio.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	p := make([]byte, int(hdr[0])|int(hdr[1])<<8|int(hdr[2])<<16)
	_, err := io.ReadFull(r, p)
	return p, err
}

// readUntilSentinel reads raw packets up to the end of the sentinel's
// result.
func readUntilSentinel(r *bufio.Reader) bool {
	seen := false
	for {
		p, err := readPacket(r)
		if err != nil {
			return false
		}
		switch {
		case len(p) == 17 && p[0] == 16 && string(p[1:]) == "hostile-sentinel": // the row
			seen = true
		case seen && len(p) > 0 && p[0] == 0xfe && len(p) < 16:
			return true
		}
	}
}
