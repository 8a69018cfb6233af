//go:build linux

package proxy

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/rawsock"
	"github.com/lockproxy/lockproxy/internal/testbed"
)

// parkSignal is a rawsock.Conn that tells the test when a wait has given
// its buffer back and is about to park, and whether the reader then held
// one.
type parkSignal struct {
	*rawsock.Conn
	parked chan bool // the buffer was held while parked
	r      **packetReader
}

func (p parkSignal) ReadOrWait(b []byte, release func()) (int, error) {
	return p.Conn.ReadOrWait(b, func() {
		release()
		select {
		case p.parked <- (*p.r).r.buf != nil:
		default:
		}
	})
}

// TestWaitIdle: a client socket with nothing to read is waited on without
// a buffer; what arrives is then read whole, and what had already arrived
// is read without waiting. The read deadline still ends the wait, and a
// closed peer ends it with the end of the stream.
func TestWaitIdle(t *testing.T) {
	a, b := testbed.TCPPair(t)
	var r *packetReader
	src := parkSignal{Conn: rawsock.New(a).(*rawsock.Conn), parked: make(chan bool, 1), r: &r}
	r = newPacketReader(src, clientBufSize)
	held := make(chan bool, 1)
	go func() {
		held <- <-src.parked
		_, _ = b.Write([]byte{3, 0, 0, 0, 'a', 'b', 'c', 1, 0, 0, 0, 'd'})
	}()
	if err := r.waitIdle(); err != nil {
		t.Fatal(err)
	}
	if <-held {
		t.Fatal("the wait kept its buffer")
	}
	if !r.holdsPacket() {
		t.Fatal("after the wait, the packet that came is not buffered")
	}
	for _, want := range []string{"abc", "d"} {
		if err := r.waitIdle(); err != nil {
			t.Fatal(err)
		}
		if !r.holdsPacket() {
			t.Fatalf("%q is not buffered", want)
		}
		_, p, err := r.readLogical(0)
		if err != nil || string(p) != want {
			t.Fatalf("read %q, %v; want %q", p, err, want)
		}
	}
	_ = a.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if err := r.waitIdle(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("wait past the deadline: %v", err)
	}
	_ = a.SetReadDeadline(time.Time{})
	_ = b.Close()
	err := r.waitIdle()
	if err == nil {
		_, _, err = r.readLogical(0)
	}
	if !isClosedConn(err) {
		t.Fatalf("wait on a closed peer: %v", err)
	}
}
