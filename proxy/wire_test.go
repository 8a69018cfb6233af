package proxy

import (
	"bytes"
	"io"
	"testing"
)

// TestPacketReaderKeepsReplacedBuffers: a packet read into a pooled
// buffer stays readable while the same command reads a larger packet
// (LOAD DATA LOCAL reads the file after the statement's packet): the
// buffer the larger one replaced goes back to its pool only at shrink,
// never to another session's reader while the command still holds it.
func TestPacketReaderKeepsReplacedBuffers(t *testing.T) {
	first := bytes.Repeat([]byte{'q'}, 100)
	var in []byte
	in = append(in, frame(0, first)...)
	in = append(in, frame(1, bytes.Repeat([]byte{'f'}, 4000))...)
	r := newPacketReader(bytes.NewReader(in), clientBufSize)
	_, a, err := r.readPhysical()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.readPhysical(); err != nil {
		t.Fatal(err)
	}
	if len(r.retired) != 1 {
		t.Fatalf("%d buffers kept for the command, want 1 (the first packet's)", len(r.retired))
	}
	// Whatever the small-buffer pool holds now is not the first packet's
	// buffer: scribbling over it leaves the first packet as it was.
	for range 8 {
		if bp, ok := smallPacketBufs.Get().(*[]byte); ok {
			clear(*bp)
		}
	}
	if !bytes.Equal(a, first) {
		t.Errorf("the first packet changed after a larger one was read: %q", a[:10])
	}
	r.shrink()
	if len(r.retired) != 0 || r.buf != nil {
		t.Errorf("after shrink: %d buffers kept, buffer %d bytes; want none", len(r.retired), len(r.buf))
	}
}

// TestPacketWriterDoesNotAllocate: writing a packet costs no allocation
// (a header that escaped cost one per packet, on every query's path).
func TestPacketWriterDoesNotAllocate(t *testing.T) {
	w := newPacketWriter(io.Discard, 1024)
	payload := make([]byte, 100)
	if n := testing.AllocsPerRun(1000, func() {
		if _, err := w.writePacket(1, payload); err != nil {
			t.Fatal(err)
		}
		if err := w.flush(); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per packet written, want 0", n)
	}
}
