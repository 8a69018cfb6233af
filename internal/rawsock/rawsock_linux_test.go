package rawsock

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
)

// TestConn: raw socket reads and writes behave as net.Conn's: data both
// ways (a write larger than the socket buffers waits for the reader),
// deadlines end a read with a timeout, a closed peer gives io.EOF, a reset
// gives ECONNRESET, and a connection closed locally gives net.ErrClosed,
// each wrapped in a *net.OpError as net.Conn wraps them.
func TestConn(t *testing.T) {
	a, b := testbed.TCPPair(t)
	ra, rb := New(a), New(b)
	if _, ok := ra.(*Conn); !ok {
		t.Fatalf("a TCP connection is not read through Conn: %T", ra)
	}

	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<20) // 16 MiB: many EAGAINs
	got := make(chan []byte, 1)
	go func() {
		buf, _ := io.ReadAll(io.LimitReader(rb, int64(len(big))))
		got <- buf
	}()
	if n, err := ra.Write(big); err != nil || n != len(big) {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if buf := <-got; !bytes.Equal(buf, big) {
		t.Fatalf("read %d bytes, not what was written", len(buf))
	}

	_ = b.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err := rb.Read(make([]byte, 10))
	var ne net.Error
	var oe *net.OpError
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &oe) || oe.Op != "read" {
		t.Fatalf("read past the deadline = %v, want a read timeout", err)
	}
	_ = b.SetReadDeadline(time.Time{})

	if _, err := ra.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if n, err := rb.Read(buf); n != 1 || err != nil || buf[0] != 'x' {
		t.Fatalf("Read = %d %q, %v", n, buf[:n], err)
	}
	_ = a.Close()
	if _, err := rb.Read(buf); err != io.EOF {
		t.Fatalf("read after the peer closed = %v, want io.EOF", err)
	}
	if _, err := ra.Read(buf); !errors.Is(err, net.ErrClosed) || !errors.As(err, &oe) || oe.Op != "read" {
		t.Fatalf("read of a closed connection = %v, want net.ErrClosed", err)
	}
	if _, err := ra.Write(buf); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write to a closed connection = %v, want net.ErrClosed", err)
	}

	// A reset: the peer closes with unread data and SO_LINGER 0.
	c, d := testbed.TCPPair(t)
	rc := New(c)
	_ = d.(*net.TCPConn).SetLinger(0)
	_ = d.Close()
	time.Sleep(50 * time.Millisecond)
	if _, err := rc.Read(buf); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after a reset = %v, want ECONNRESET", err)
	}

	// A read parked on the poller ends when the connection is closed.
	e, _ := testbed.TCPPair(t)
	re := New(e)
	ended := make(chan error, 1)
	go func() {
		_, err := re.Read(buf)
		ended <- err
	}()
	time.Sleep(50 * time.Millisecond)
	_ = e.Close()
	select {
	case err := <-ended:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("parked read ended with %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a parked read did not end when its connection was closed")
	}

	// A Unix socket (a dialled one has no name): the same, errors included.
	uln, err := net.Listen("unix", t.TempDir()+"/s")
	if err != nil {
		t.Fatal(err)
	}
	defer uln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := uln.Accept()
		accepted <- c
	}()
	u, err := net.Dial("unix", uln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	us := <-accepted
	defer us.Close()
	ru := New(u)
	if _, ok := ru.(*Conn); !ok {
		t.Fatalf("a Unix connection is not read through Conn: %T", ru)
	}
	if _, err := New(us).Write([]byte("y")); err != nil {
		t.Fatal(err)
	}
	if n, err := ru.Read(buf); n != 1 || err != nil || buf[0] != 'y' {
		t.Fatalf("unix Read = %d %q, %v", n, buf[:n], err)
	}
	_ = u.Close()
	if _, err := ru.Read(buf); !errors.Is(err, net.ErrClosed) || !errors.As(err, &oe) || oe.Net != "unix" {
		t.Fatalf("read of a closed Unix connection = %v, want net.ErrClosed from a unix OpError", err)
	}

	// Other connections are read as they are.
	p, q := net.Pipe()
	defer p.Close()
	defer q.Close()
	if rw := New(p); rw != net.Conn(p) {
		t.Fatalf("a pipe is wrapped: %T", rw)
	}
}

// TestSyscallConnPeeksFirst: the RawConn of Conn.SyscallConn calls a
// read's function only when the socket holds data or has ended, never
// for an empty socket, and the function then sees the socket as it is;
// Readable tells the same without a function.
func TestSyscallConnPeeksFirst(t *testing.T) {
	a, b := testbed.TCPPair(t)
	ra := New(a)
	rc, err := ra.(*Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	peek := func() (calls, n int) {
		if err := rc.Read(func(fd uintptr) bool {
			calls++
			var p [1]byte
			n, _, _ = syscall.Recvfrom(int(fd), p[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			return true
		}); err != nil {
			t.Fatal(err)
		}
		return calls, n
	}
	if calls, _ := peek(); calls != 0 {
		t.Fatalf("an empty socket called the read's function %d times", calls)
	}
	if Readable(ra) {
		t.Fatal("an empty socket is readable")
	}
	if _, err := b.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, 10*time.Second, "the byte reaches the socket", func() bool { return Readable(ra) })
	if calls, n := peek(); calls != 1 || n != 1 {
		t.Fatalf("a socket holding a byte: %d calls, peeked %d bytes", calls, n)
	}
	if _, err := ra.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if Readable(ra) {
		t.Fatal("a socket read empty is readable")
	}
	_ = b.Close()
	testbed.Eventually(t, 10*time.Second, "the peer's close reaches the socket", func() bool { return Readable(ra) })
	if calls, n := peek(); calls != 1 || n != 0 {
		t.Fatalf("a socket its peer closed: %d calls, peeked %d bytes", calls, n)
	}
}
