package proxy

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"
	"testing/iotest"
	"time"
)

// TestConnReader: reads, peeks and discards through a small buffer give
// back the stream as written, whatever the source's read sizes, and the
// buffer goes back to its pool only when nothing is buffered.
func TestConnReader(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 100)
	for _, tc := range []struct {
		name string
		src  func() io.Reader
	}{
		{"whole", func() io.Reader { return bytes.NewReader(data) }},
		{"one byte at a time", func() io.Reader { return iotest.OneByteReader(bytes.NewReader(data)) }},
		{"half reads", func() io.Reader { return iotest.HalfReader(bytes.NewReader(data)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newConnReader(tc.src(), 64)
			var got []byte
			for len(got) < len(data) {
				h, err := c.Peek(10)
				if err != nil && len(h) == 0 {
					t.Fatalf("peek at %d: %v", len(got), err)
				}
				if !bytes.Equal(h, data[len(got):len(got)+len(h)]) {
					t.Fatalf("peek at %d: %q", len(got), h)
				}
				n, _ := c.Discard(min(3, len(h)))
				got = append(got, h[:n]...)
				buf := make([]byte, 7)
				m, err := io.ReadFull(c, buf[:min(7, len(data)-len(got))])
				if err != nil {
					t.Fatalf("read at %d: %v", len(got), err)
				}
				got = append(got, buf[:m]...)
				if c.Buffered() > 0 {
					c.release()
					if c.buf == nil {
						t.Fatalf("buffer given back with %d bytes buffered", c.Buffered())
					}
				}
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("read back %d bytes, not what was written", len(got))
			}
			if _, err := c.Read(make([]byte, 1)); err != io.EOF {
				t.Fatalf("read past the end: %v, want EOF", err)
			}
			c.release()
			if c.buf != nil {
				t.Fatal("buffer kept with nothing buffered")
			}
		})
	}
}

// parkSignal is a sockIO that tells the test when a wait has given its
// buffer back and is about to park.
type parkSignal struct {
	*sockIO
	parked chan struct{}
}

func (p parkSignal) readOrWait(b []byte, release func()) (int, error) {
	return p.sockIO.readOrWait(b, func() {
		release()
		select {
		case p.parked <- struct{}{}:
		default:
		}
	})
}

// TestWaitIdle: a client socket with nothing to read is waited on without
// a buffer; what arrives is then read whole, and what had already arrived
// is read without waiting. The read deadline still ends the wait, and a
// closed peer ends it with the end of the stream.
func TestWaitIdle(t *testing.T) {
	a, b := tcpPair(t)
	src := parkSignal{sockIO: newSockIO(a).(*sockIO), parked: make(chan struct{}, 1)}
	r := newPacketReader(src, clientBufSize)
	go func() {
		<-src.parked
		_, _ = b.Write([]byte{3, 0, 0, 0, 'a', 'b', 'c', 1, 0, 0, 0, 'd'})
	}()
	if err := r.waitIdle(); err != nil {
		t.Fatal(err)
	}
	if r.r.buf != nil {
		t.Fatal("the wait kept its buffer")
	}
	for _, want := range []string{"abc", "d"} {
		if err := r.waitIdle(); err != nil {
			t.Fatal(err)
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
