package proxy

import (
	"bufio"
	"io"
	"sync"
)

// Buffers of client and backend connections come from pools and go back
// to them when the connection has nothing buffered at the end of a
// command, so an idle connection holds none: with thousands of idle
// client connections (each pinning a backend connection) the buffers
// were most of lockproxy's memory. A pool is per size.
var (
	readPools  sync.Map // size → *sync.Pool of *[]byte
	writePools sync.Map // size → *sync.Pool of *bufio.Writer
)

func poolOf(m *sync.Map, size int) *sync.Pool {
	if p, ok := m.Load(size); ok {
		return p.(*sync.Pool)
	}
	p, _ := m.LoadOrStore(size, new(sync.Pool))
	return p.(*sync.Pool)
}

// waitReader is a source that can wait for data without holding a
// buffer (rawsock.Conn): ReadOrWait reads into p what is there now, or,
// when nothing is, calls release and waits until something is, returning
// 0 and no error.
type waitReader interface {
	ReadOrWait(p []byte, release func()) (int, error)
}

// connReader buffers reads from src, like bufio.Reader, in a buffer taken
// from the pool of its size on the first read and given back by release.
// It is owned by one goroutine at a time.
type connReader struct {
	src  io.Reader
	size int
	pool *sync.Pool
	buf  []byte  // nil when released
	bufp *[]byte // what the pool holds buf as (Put of a new pointer allocates)
	r, w int     // buf[r:w] is buffered
	// releaseFn is release as a method value, made once: waitIdle
	// passes it on every wait.
	releaseFn func()
}

func newConnReader(src io.Reader, size int) *connReader {
	c := &connReader{src: src, size: size, pool: poolOf(&readPools, size)}
	c.releaseFn = c.release
	return c
}

func (c *connReader) take() {
	if b, ok := c.pool.Get().(*[]byte); ok {
		c.bufp = b
	} else {
		b := make([]byte, c.size)
		c.bufp = &b
	}
	c.buf = *c.bufp
	c.r, c.w = 0, 0
}

// release gives the buffer back to its pool when nothing is buffered.
func (c *connReader) release() {
	if c.buf == nil || c.r != c.w {
		return
	}
	c.pool.Put(c.bufp)
	c.buf, c.bufp, c.r, c.w = nil, nil, 0, 0
}

// Buffered is how many bytes can be read without reading src.
func (c *connReader) Buffered() int { return c.w - c.r }

// Size is the buffer's size: the most Peek returns.
func (c *connReader) Size() int { return c.size }

// fill reads src once into the free end of the buffer (compacting it
// first when the end is full).
func (c *connReader) fill() error {
	if c.buf == nil {
		c.take()
	}
	if c.r == c.w {
		c.r, c.w = 0, 0
	} else if c.w == len(c.buf) && c.r > 0 {
		c.w = copy(c.buf, c.buf[c.r:c.w])
		c.r = 0
	}
	for range 100 {
		n, err := c.src.Read(c.buf[c.w:])
		c.w += n
		if n > 0 || err != nil {
			if n > 0 {
				return nil
			}
			return err
		}
	}
	return io.ErrNoProgress
}

// Read reads into p what is buffered, or from src: directly when p is at
// least a buffer long and nothing is buffered.
func (c *connReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if c.r == c.w {
		if len(p) >= c.size {
			return c.src.Read(p)
		}
		if err := c.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, c.buf[c.r:c.w])
	c.r += n
	return n, nil
}

// Peek returns the next n bytes (n at most Size) without consuming them,
// valid until the next read; with fewer, the error says why.
func (c *connReader) Peek(n int) ([]byte, error) {
	n = min(n, c.size)
	for c.w-c.r < n {
		if c.buf != nil && c.r > 0 && len(c.buf)-c.r < n {
			c.w = copy(c.buf, c.buf[c.r:c.w])
			c.r = 0
		}
		if err := c.fill(); err != nil {
			return c.buf[c.r:c.w], err
		}
	}
	return c.buf[c.r : c.r+n], nil
}

// Discard drops n buffered bytes (n at most Buffered).
func (c *connReader) Discard(n int) (int, error) {
	n = min(n, c.w-c.r)
	c.r += n
	return n, nil
}

// waitIdle returns once something is buffered, holding no buffer while
// it waits when src can wait without one. Without such a source, it
// returns at once.
func (c *connReader) waitIdle() error {
	wr, ok := c.src.(waitReader)
	if !ok || c.r != c.w {
		return nil
	}
	for {
		if c.buf == nil {
			c.take()
		}
		// After a wait the socket is readable: the next call reads
		// what came (a command whole, as a rule).
		n, err := wr.ReadOrWait(c.buf, c.releaseFn)
		if n > 0 {
			c.r, c.w = 0, n
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// connWriter is a bufio.Writer taken from the pool of its size on the
// first write and given back once a flush leaves nothing buffered.
type connWriter struct {
	dst  io.Writer
	pool *sync.Pool
	size int
	w    *bufio.Writer // nil when released
}

func newConnWriter(dst io.Writer, size int) connWriter {
	return connWriter{dst: dst, size: size, pool: poolOf(&writePools, size)}
}

func (c *connWriter) writer() *bufio.Writer {
	if c.w == nil {
		if w, ok := c.pool.Get().(*bufio.Writer); ok {
			w.Reset(c.dst)
			c.w = w
		} else {
			c.w = bufio.NewWriterSize(c.dst, c.size)
		}
	}
	return c.w
}

func (c *connWriter) Write(p []byte) (int, error) { return c.writer().Write(p) }

// Flush writes what is buffered and gives the buffer back.
func (c *connWriter) Flush() error {
	if c.w == nil {
		return nil
	}
	if err := c.w.Flush(); err != nil {
		return err
	}
	c.w.Reset(nil)
	c.pool.Put(c.w)
	c.w = nil
	return nil
}

// Buffered is how many bytes wait for a flush.
func (c *connWriter) Buffered() int {
	if c.w == nil {
		return 0
	}
	return c.w.Buffered()
}
