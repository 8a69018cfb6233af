package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// maxPayload is the largest payload of one physical MySQL packet; a logical
// packet of this size or more continues in the next physical packet.
const maxPayload = 1<<24 - 1

// errPacketTooLarge is returned when a client packet exceeds max_allowed_packet.
var errPacketTooLarge = errors.New("proxy: packet larger than max_allowed_packet")

// errBadSequence is returned when a packet arrives out of sequence.
var errBadSequence = errors.New("proxy: packet out of sequence")

// packetReader reads MySQL packets from a buffered stream. It is owned by one
// goroutine at a time.
type packetReader struct {
	r   *connReader
	buf []byte // reused across reads; a returned payload is valid until the next read
	hdr [4]byte
	// mem, when set, is charged for buf beyond freePacketBuf (client
	// connections); charged is what buf holds of it now.
	mem     *sessionMem
	charged int64
	// pool is where buf came from, as bufp, and goes back to (shrink):
	// packetBufs or smallPacketBufs; nil when buf is the reader's own.
	pool *sync.Pool
	bufp *[]byte
	// retired are pooled buffers resize replaced during the command:
	// what was read into them may still be read (the command's first
	// packet, while a LOAD DATA LOCAL reads the file after it), so they
	// go back to their pools only when the command is over (shrink).
	retired []pooledBuf
}

// pooledBuf is a buffer taken from pool.
type pooledBuf struct {
	pool *sync.Pool
	bufp *[]byte
}

// freePacketBuf is the packet buffer every client connection may keep
// without charge to its memory budget.
const freePacketBuf = 64 << 10

func newPacketReader(r io.Reader, size int) *packetReader {
	return &packetReader{r: newConnReader(r, size)}
}

// readPhysical reads one physical packet: its sequence id and payload. The
// payload aliases the reader's buffer. Without a memory budget (backends)
// the announced length is allocated as it comes.
func (p *packetReader) readPhysical() (seq byte, payload []byte, err error) {
	if _, err = io.ReadFull(p.r, p.hdr[:]); err != nil {
		return 0, nil, err
	}
	n := int(uint32(p.hdr[0]) | uint32(p.hdr[1])<<8 | uint32(p.hdr[2])<<16)
	switch {
	case p.mem != nil:
		if err := p.grow(n); err != nil {
			return 0, nil, err
		}
	case cap(p.buf) < n:
		p.resize(n, max(n, 2*cap(p.buf)), 0)
	}
	p.buf = p.buf[:n]
	if _, err = io.ReadFull(p.r, p.buf); err != nil {
		return 0, nil, unexpectedEOF(err)
	}
	return p.hdr[3], p.buf, nil
}

// holdsPacket reports whether the next physical packet is whole in the
// buffer and is the last of its logical packet: reading it will not read
// the connection.
func (p *packetReader) holdsPacket() bool {
	c := p.r
	if c.w-c.r < 4 {
		return false
	}
	h := c.buf[c.r:c.w]
	n := int(uint32(h[0]) | uint32(h[1])<<8 | uint32(h[2])<<16)
	return n < maxPayload && len(h)-4 >= n
}

// peekLen reports the payload length of the next physical packet without
// reading it.
func (p *packetReader) peekLen() (int, error) {
	h, err := p.r.Peek(4)
	if err != nil {
		return 0, err
	}
	return int(uint32(h[0]) | uint32(h[1])<<8 | uint32(h[2])<<16), nil
}

// copyPhysical passes the next physical packet to w through the reader's
// own buffer, a piece at a time, never holding its payload whole. It
// returns the payload's length; an error writing to w is a clientIOError.
func (p *packetReader) copyPhysical(w *packetWriter) (int, error) {
	if _, err := io.ReadFull(p.r, p.hdr[:]); err != nil {
		return 0, err
	}
	n := int(uint32(p.hdr[0]) | uint32(p.hdr[1])<<8 | uint32(p.hdr[2])<<16)
	hdr := p.hdr
	hdr[3] += w.shift
	w.next = hdr[3] + 1
	if _, err := w.w.Write(hdr[:]); err != nil {
		return 0, clientIOError{err}
	}
	for left := n; left > 0; {
		b, err := p.r.Peek(min(left, p.r.Size()))
		if len(b) == 0 {
			return 0, unexpectedEOF(err)
		}
		if _, err := w.w.Write(b); err != nil {
			return 0, clientIOError{err}
		}
		_, _ = p.r.Discard(len(b))
		left -= len(b)
	}
	return n, nil
}

// readLogical reads a whole logical packet (joining continuations), refusing
// one larger than limit bytes (0: no limit) before allocating for it. It
// returns the sequence id of the last physical packet. The payload is valid
// until the next read. A packet the reader's memory budget cannot hold is
// read past and answered with outOfMemory: the connection stays usable.
func (p *packetReader) readLogical(limit int) (lastSeq byte, payload []byte, err error) {
	total := 0
	for first := true; ; first = false {
		if _, err = io.ReadFull(p.r, p.hdr[:]); err != nil {
			if !first {
				err = unexpectedEOF(err)
			}
			return 0, nil, err
		}
		n := int(uint32(p.hdr[0]) | uint32(p.hdr[1])<<8 | uint32(p.hdr[2])<<16)
		if !first && p.hdr[3] != lastSeq+1 {
			return 0, nil, errBadSequence
		}
		lastSeq = p.hdr[3]
		if limit > 0 && total+n > limit {
			return 0, nil, errPacketTooLarge
		}
		if err := p.grow(total + n); err != nil {
			if serr := p.skip(n); serr != nil {
				return 0, nil, serr
			}
			return 0, nil, err
		}
		if _, err = io.ReadFull(p.r, p.buf[total:total+n]); err != nil {
			return 0, nil, unexpectedEOF(err)
		}
		total += n
		if n < maxPayload {
			return lastSeq, p.buf[:total], nil
		}
	}
}

// grow makes buf hold at least n bytes (keeping what it holds), charging
// the memory budget for what goes beyond freePacketBuf.
func (p *packetReader) grow(n int) error {
	if cap(p.buf) >= n {
		p.buf = p.buf[:n]
		return nil
	}
	size := n
	if n <= freePacketBuf {
		size = max(n, min(2*cap(p.buf), freePacketBuf))
	}
	cost := int64(max(size-freePacketBuf, 0))
	if cost > p.charged {
		if !p.mem.take(cost-p.charged, shareAll) {
			return outOfMemory("a client packet", int64(n))
		}
		p.charged = cost
	}
	p.resize(n, size, len(p.buf))
	return nil
}

// Packets up to pooledPacketBuf are read into buffers taken from a pool
// (packetBufs, or smallPacketBufs for packets up to smallPacketBuf) and
// given back once the command is over (shrink): an idle connection holds
// no packet buffer, and a pinned session has two connections.
const (
	pooledPacketBuf = 16 << 10
	smallPacketBuf  = 1 << 10
)

var packetBufs, smallPacketBufs sync.Pool // of *[]byte, pooledPacketBuf and smallPacketBuf long

// resize replaces buf with one of length n and at least capacity size,
// keeping its first keep bytes: from a pool when one's buffers hold n.
func (p *packetReader) resize(n, size, keep int) {
	var pool *sync.Pool
	var bp *[]byte
	var nb []byte
	switch {
	case n <= smallPacketBuf:
		pool = &smallPacketBufs
	case n <= pooledPacketBuf:
		pool = &packetBufs
	}
	if pool != nil {
		bp, _ = pool.Get().(*[]byte)
		if bp == nil {
			b := make([]byte, smallPacketBuf)
			if pool == &packetBufs {
				b = make([]byte, pooledPacketBuf)
			}
			bp = &b
		}
		nb = (*bp)[:n]
	} else {
		nb = make([]byte, n, size)
	}
	copy(nb, p.buf[:keep])
	if p.pool != nil {
		p.retired = append(p.retired, pooledBuf{p.pool, p.bufp})
	}
	p.buf, p.bufp, p.pool = nb, bp, pool
}

// putBack gives a pooled packet buffer back.
func (p *packetReader) putBack() {
	if p.pool != nil {
		p.pool.Put(p.bufp)
		p.buf, p.bufp, p.pool = nil, nil, nil
	}
}

// skip reads past the rest of a logical packet whose current physical part
// has n bytes left, without keeping it.
func (p *packetReader) skip(n int) error {
	for {
		if _, err := io.CopyN(io.Discard, p.r, int64(n)); err != nil {
			return unexpectedEOF(err)
		}
		if n < maxPayload {
			return nil
		}
		if _, err := io.ReadFull(p.r, p.hdr[:]); err != nil {
			return unexpectedEOF(err)
		}
		n = int(uint32(p.hdr[0]) | uint32(p.hdr[1])<<8 | uint32(p.hdr[2])<<16)
	}
}

// shrink gives the packet buffer back (to its pool, or to the collector
// with its charge when a large packet grew it), so an idle connection
// holds none.
func (p *packetReader) shrink() {
	p.r.release()
	for i, r := range p.retired {
		r.pool.Put(r.bufp)
		p.retired[i] = pooledBuf{}
	}
	p.retired = p.retired[:0]
	switch {
	case p.pool != nil:
		p.putBack()
	case cap(p.buf) > freePacketBuf:
		p.buf = nil
		p.mem.give(p.charged)
		p.charged = 0
	default:
		p.buf = nil
	}
}

// waitIdle returns once the next packet has begun to arrive, holding no
// buffer meanwhile where the connection allows (connReader.waitIdle).
func (p *packetReader) waitIdle() error { return p.r.waitIdle() }

// buffered reports how many bytes can be read without blocking.
func (p *packetReader) buffered() int { return p.r.Buffered() }

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// packetWriter writes MySQL packets through a buffer; callers Flush when a
// response is complete or before they would block on the other side.
type packetWriter struct {
	w connWriter
	// shift is added to every sequence id written, and next is the id
	// after the last one written: a text lockproxy runs in pieces
	// (session.querySplit) answers each piece in one sequence.
	shift, next byte
	// hdr is the header being written: on the stack it would escape
	// (bufio hands a long write to its writer) and cost an allocation
	// per packet.
	hdr [4]byte
}

func newPacketWriter(w io.Writer, size int) *packetWriter {
	return &packetWriter{w: newConnWriter(w, size)}
}

// writePhysical writes one physical packet with the given sequence id.
func (p *packetWriter) writePhysical(seq byte, payload []byte) error {
	n := len(payload)
	seq += p.shift
	p.next = seq + 1
	p.hdr = [4]byte{byte(n), byte(n >> 8), byte(n >> 16), seq}
	if _, err := p.w.Write(p.hdr[:]); err != nil {
		return err
	}
	_, err := p.w.Write(payload)
	return err
}

// writePacket writes a logical packet starting at sequence seq, splitting it
// as the protocol requires, and returns the next sequence id.
func (p *packetWriter) writePacket(seq byte, payload []byte) (byte, error) {
	for {
		n := min(len(payload), maxPayload)
		if err := p.writePhysical(seq, payload[:n]); err != nil {
			return seq, err
		}
		seq++
		payload = payload[n:]
		if n < maxPayload {
			return seq, nil
		}
	}
}

func (p *packetWriter) flush() error { return p.w.Flush() }

// Length-encoded integers and strings (MySQL protocol basic types).

func appendLenEncInt(b []byte, n uint64) []byte {
	switch {
	case n < 251:
		return append(b, byte(n))
	case n < 1<<16:
		return append(b, 0xfc, byte(n), byte(n>>8))
	case n < 1<<24:
		return append(b, 0xfd, byte(n), byte(n>>8), byte(n>>16))
	default:
		b = append(b, 0xfe)
		return binary.LittleEndian.AppendUint64(b, n)
	}
}

func appendLenEncString(b []byte, s string) []byte {
	b = appendLenEncInt(b, uint64(len(s)))
	return append(b, s...)
}

// readLenEncInt decodes a length-encoded integer at b[pos:].
func readLenEncInt(b []byte, pos int) (n uint64, next int, isNull bool, err error) {
	if pos >= len(b) {
		return 0, pos, false, errShortPacket
	}
	switch c := b[pos]; {
	case c < 0xfb:
		return uint64(c), pos + 1, false, nil
	case c == 0xfb:
		return 0, pos + 1, true, nil
	case c == 0xfc:
		if pos+3 > len(b) {
			return 0, pos, false, errShortPacket
		}
		return uint64(binary.LittleEndian.Uint16(b[pos+1:])), pos + 3, false, nil
	case c == 0xfd:
		if pos+4 > len(b) {
			return 0, pos, false, errShortPacket
		}
		return uint64(b[pos+1]) | uint64(b[pos+2])<<8 | uint64(b[pos+3])<<16, pos + 4, false, nil
	case c == 0xfe:
		if pos+9 > len(b) {
			return 0, pos, false, errShortPacket
		}
		return binary.LittleEndian.Uint64(b[pos+1:]), pos + 9, false, nil
	default:
		return 0, pos, false, fmt.Errorf("%w: bad length-encoded integer 0x%x", errShortPacket, c)
	}
}

// readLenEncString decodes a length-encoded string at b[pos:].
func readLenEncString(b []byte, pos int) (s []byte, next int, err error) {
	n, pos, isNull, err := readLenEncInt(b, pos)
	if err != nil || isNull {
		return nil, pos, err
	}
	if uint64(len(b)-pos) < n {
		return nil, pos, errShortPacket
	}
	return b[pos : pos+int(n)], pos + int(n), nil
}

var errShortPacket = errors.New("proxy: malformed packet")
