package proxy

import (
	"bytes"
	"io"
	"testing"
	"testing/iotest"
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
