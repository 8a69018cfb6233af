package proxy

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"io"
	"net"
)

// The compressed protocol (CLIENT_COMPRESS) on the client's side: after
// the login's OK, every byte of the packet stream travels in compressed
// packets, each a 7-byte header (compressed length, sequence id,
// uncompressed length, 0 when the payload is sent as is) and a zlib
// payload. compressConn carries the packet stream over it, so the session's
// packet reader and writer run unchanged above it. Backend connections are
// not compressed: lockproxy and MariaDB are meant to share a network.

// minCompress is the payload below which a compressed packet carries its
// bytes as they are (MariaDB's MIN_COMPRESS_LENGTH).
const minCompress = 50

// maxCompressedPayload is the most one compressed packet carries.
const maxCompressedPayload = 1<<24 - 1

// compressConn is a client connection in the compressed protocol. Reads
// and writes are the session goroutine's only.
type compressConn struct {
	net.Conn
	rbuf []byte // uncompressed bytes not read yet
	seq  byte   // the sequence id of the next compressed packet written
	zbuf bytes.Buffer
	zw   *zlib.Writer
	out  []byte
}

func newCompressConn(c net.Conn) *compressConn {
	cc := &compressConn{Conn: c}
	cc.zw = zlib.NewWriter(&cc.zbuf)
	return cc
}

// NetConn returns the connection under the compression (see resetClose).
func (c *compressConn) NetConn() net.Conn { return c.Conn }

// Read returns uncompressed bytes of the client's packet stream.
func (c *compressConn) Read(p []byte) (int, error) {
	for len(c.rbuf) == 0 {
		if err := c.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, c.rbuf)
	c.rbuf = c.rbuf[n:]
	return n, nil
}

// fill reads one compressed packet. The client's sequence id sets the
// next one lockproxy writes: a command starts a new sequence.
func (c *compressConn) fill() error {
	var h [7]byte
	if _, err := io.ReadFull(c.Conn, h[:]); err != nil {
		return err
	}
	clen := int(h[0]) | int(h[1])<<8 | int(h[2])<<16
	ulen := int(h[4]) | int(h[5])<<8 | int(h[6])<<16
	c.seq = h[3] + 1
	body := make([]byte, clen)
	if _, err := io.ReadFull(c.Conn, body); err != nil {
		return err
	}
	if ulen == 0 {
		c.rbuf = body
		return nil
	}
	zr, err := zlib.NewReader(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: compressed packet: %v", errBadCommand, err)
	}
	out := make([]byte, ulen)
	if _, err := io.ReadFull(zr, out); err != nil {
		return fmt.Errorf("%w: compressed packet of %d bytes: %v", errBadCommand, ulen, err)
	}
	c.rbuf = out
	return nil
}

// Write sends p in compressed packets.
func (c *compressConn) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), maxCompressedPayload)]
		if err := c.writePacket(chunk); err != nil {
			return n, err
		}
		n += len(chunk)
		p = p[len(chunk):]
	}
	return n, nil
}

func (c *compressConn) writePacket(chunk []byte) error {
	payload, ulen := chunk, 0
	if len(chunk) >= minCompress {
		c.zbuf.Reset()
		c.zw.Reset(&c.zbuf)
		if _, err := c.zw.Write(chunk); err != nil {
			return err
		}
		if err := c.zw.Close(); err != nil {
			return err
		}
		if c.zbuf.Len() < len(chunk) {
			payload, ulen = c.zbuf.Bytes(), len(chunk)
		}
	}
	n := len(payload)
	c.out = append(c.out[:0], byte(n), byte(n>>8), byte(n>>16), c.seq, byte(ulen), byte(ulen>>8), byte(ulen>>16))
	c.out = append(c.out, payload...)
	c.seq++
	_, err := c.Conn.Write(c.out)
	if cap(c.out) > 1<<20 {
		c.out = nil // keep no large buffer between results
	}
	return err
}
