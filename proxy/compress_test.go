package proxy

import (
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
)

// countingRelay forwards TCP connections to addr; finish waits for them
// to end and returns the bytes sent back to the client.
func countingRelay(t *testing.T, addr string) (relay string, finish func() int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var back atomic.Int64
	var wg sync.WaitGroup
	finish = func() int64 { ln.Close(); wg.Wait(); return back.Load() }
	t.Cleanup(func() { finish() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			wg.Add(2)
			go func() { defer wg.Done(); _, _ = io.Copy(s, c); s.Close() }()
			go func() {
				defer wg.Done()
				n, _ := io.Copy(c, s)
				back.Add(n)
				c.Close()
			}()
		}
	}()
	return ln.Addr().String(), finish
}

// TestCompressedProtocol: a client that asks for compression gets it
// from lockproxy as from MariaDB: the same answers (text, prepared, an
// error, a row over 16 MiB, a multi-statement text), in far fewer bytes
// than they hold.
func TestCompressedProtocol(t *testing.T) {
	p := startProxy(t, nil)
	db := freshDB(t, p)
	run := func(addr string) ([]string, int64) {
		t.Helper()
		relay, finish := countingRelay(t, addr)
		c, err := client.Connect(relay, p.bed.User, p.bed.Password, db, func(c *client.Conn) error {
			return c.SetCapability(mysql.CLIENT_COMPRESS)
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close() // before finish, which waits for the relay: a failure below must not hang
		var got []string
		for _, q := range []string{
			"SELECT REPEAT('z', 1000000)",
			"SELECT * FROM nowhere",
			"SELECT LENGTH(REPEAT('a', 17 << 20)), MD5(REPEAT('a', 17 << 20))",
			"SELECT REPEAT('b', 17 << 20)",
		} {
			r, err := c.Execute(q)
			if err != nil {
				got = append(got, err.Error())
				continue
			}
			s, _ := r.GetString(0, 0)
			got = append(got, s)
		}
		st, err := c.Prepare("SELECT REPEAT(?, 300000)")
		if err != nil {
			t.Fatal(err)
		}
		r, err := st.Execute("xy")
		if err != nil {
			t.Fatal(err)
		}
		s, _ := r.GetString(0, 0)
		got = append(got, s)
		st.Close()
		c.Close()
		return got, finish()
	}
	want, directBytes := run(p.bed.PrimaryAddr)
	got, proxiedBytes := run(p.addr)
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("answer %d: through lockproxy %.60q (%d bytes), directly %.60q (%d bytes)", i, got[i], len(got[i]), want[i], len(want[i]))
		}
	}
	total := 0
	for _, s := range want {
		total += len(s)
	}
	if proxiedBytes*10 > int64(total) || !strings.Contains(got[1], "1146") {
		t.Errorf("%d bytes reached the client for %d bytes of answers (directly %d)", proxiedBytes, total, directBytes)
	}
	t.Logf("%d bytes of answers: %d on the wire directly, %d through lockproxy", total, directBytes, proxiedBytes)
}
