package proxy

import (
	"bytes"
	"database/sql"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-sql-driver/mysql"
	"github.com/lockproxy/lockproxy/rules"
)

// readGreeting reads the proxy's initial handshake from c.
func readGreeting(t *testing.T, c net.Conn) []byte {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	r := newPacketReader(c, 4096)
	_, p, err := r.readLogical(0)
	if err != nil {
		t.Fatalf("greeting: %v", err)
	}
	if p[0] != 10 {
		t.Fatalf("greeting protocol = %d, want 10", p[0])
	}
	return p
}

// expectClosed asserts the proxy ends the connection (after at most one
// packet, which is returned) within the deadline.
func expectClosed(t *testing.T, c net.Conn, within time.Duration) []byte {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(within))
	data, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open after %v", within)
	}
	return data
}

// stillServes asserts a fresh client can run a query through the proxy.
func stillServes(t *testing.T, p *testProxy) {
	t.Helper()
	db := p.db(t, "", "")
	var one int
	if err := db.QueryRow("SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("proxy no longer serves: %v", err)
	}
}

func TestBadInput(t *testing.T) {
	p := startProxy(t, func(c *rules.Config) { c.Proxy.MaxAllowedPacket = 1 << 20 })
	dial := func(t *testing.T) net.Conn {
		c, err := net.Dial("tcp", p.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}

	t.Run("garbage instead of handshake", func(t *testing.T) {
		c := dial(t)
		readGreeting(t, c)
		_, _ = c.Write(bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 64))
		expectClosed(t, c, 5*time.Second)
		stillServes(t, p)
	})
	t.Run("truncated handshake packet", func(t *testing.T) {
		c := dial(t)
		readGreeting(t, c)
		// Header promises 200 bytes; 10 arrive, then the client hangs up its side.
		_, _ = c.Write([]byte{200, 0, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
		_ = c.(*net.TCPConn).CloseWrite()
		expectClosed(t, c, 5*time.Second)
		stillServes(t, p)
	})
	t.Run("short handshake response", func(t *testing.T) {
		c := dial(t)
		readGreeting(t, c)
		_, _ = c.Write([]byte{3, 0, 0, 1, 0x85, 0xa6, 0x03})
		got := expectClosed(t, c, 5*time.Second)
		if !bytes.Contains(got, []byte("lockproxy:")) {
			t.Errorf("want a lockproxy error before close, got %q", got)
		}
		stillServes(t, p)
	})
	t.Run("handshake never finished", func(t *testing.T) {
		c := dial(t)
		readGreeting(t, c)
		// handshake_timeout is 5s in startProxy.
		expectClosed(t, c, 10*time.Second)
		stillServes(t, p)
	})
	t.Run("wrong password", func(t *testing.T) {
		db, err := sql.Open("mysql", p.bed.User+":wrong-password@tcp("+p.addr+")/")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		err = db.Ping()
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != erAccessDenied || string(me.SQLState[:]) != "28000" {
			t.Fatalf("want 1045/28000, got %v", err)
		}
		stillServes(t, p)
	})
	t.Run("unknown user", func(t *testing.T) {
		_, err := client.Connect(p.addr, "nobody", "x", "")
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte("1045")) {
			t.Fatalf("unknown user: want 1045, got %v", err)
		}
		stillServes(t, p)
	})
	t.Run("packet over max_allowed_packet", func(t *testing.T) {
		c, err := client.Connect(p.addr, p.bed.User, p.bed.Password, "")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, err = c.Execute("SELECT '" + string(bytes.Repeat([]byte{'x'}, 2<<20)) + "'")
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte("max_allowed_packet")) {
			t.Fatalf("want a max_allowed_packet error, got %v", err)
		}
		stillServes(t, p)
	})
	t.Run("disconnect mid-result", func(t *testing.T) {
		c, err := client.Connect(p.addr, p.bed.User, p.bed.Password, "")
		if err != nil {
			t.Fatal(err)
		}
		// Ask for a large result, read only its first packet, and hang up.
		c.ResetSequence()
		if err := c.WritePacket(append(make([]byte, 4), append([]byte{0x03}, "SELECT seq, REPEAT('x', 200) FROM seq_1_to_2000000"...)...)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ReadPacket(); err != nil {
			t.Fatal(err)
		}
		c.Close()
		stillServes(t, p)
		// The proxy must not keep a broken backend connection around: every
		// further session still works, several times over.
		for i := 0; i < 5; i++ {
			stillServes(t, p)
		}
	})
	t.Run("unknown command", func(t *testing.T) {
		c, err := client.Connect(p.addr, p.bed.User, p.bed.Password, "")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.ResetSequence()
		if err := c.WritePacket(append(make([]byte, 4), 0x1d)); err != nil { // COM_DAEMON
			t.Fatal(err)
		}
		pkt, err := c.ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		if e := parseErrPayload(pkt); e.Code != erUnknownCom || !bytes.HasPrefix([]byte(e.Msg), []byte("lockproxy:")) {
			t.Fatalf("want 1047 from lockproxy, got %+v", e)
		}
		if _, err := c.Execute("SELECT 1"); err != nil {
			t.Fatalf("session unusable after unknown command: %v", err)
		}
	})
}

func TestMaxConnections(t *testing.T) {
	p := startProxy(t, func(c *rules.Config) { c.Proxy.MaxConnections = 2 })
	var held []*client.Conn
	for i := 0; i < 2; i++ {
		c, err := client.Connect(p.addr, p.bed.User, p.bed.Password, "")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	_, err := client.Connect(p.addr, p.bed.User, p.bed.Password, "")
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("1040")) {
		t.Fatalf("third connection: want 1040, got %v", err)
	}
	held[0].Close()
	// The slot frees once the session has ended on the proxy side.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := client.Connect(p.addr, p.bed.User, p.bed.Password, "")
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot never freed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	held[1].Close()
}
