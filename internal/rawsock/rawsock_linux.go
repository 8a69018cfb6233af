package rawsock

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// Conn is a TCP or Unix connection whose Read and Write are raw read(2)
// and write(2) on Go's poller (syscall.RawConn): the socket is
// non-blocking, so a call returns at once with data, EAGAIN (then the
// goroutine parks until the poller says the socket is ready, as
// net.Conn's would) or an error. net.Conn's own Read and Write enter the
// scheduler's syscall state around every call (entersyscall): when every
// P has been idle that wakes the runtime's monitor thread (sysmon) with a
// futex, and a call the monitor finds still in the kernel (a loopback
// write runs the receiver's side of TCP too) makes it hand the P to
// another thread and keep polling every 20 µs. On a process that spends
// most of its life waiting for the network that is a thread wake-up more
// per call, and the monitor's polling was a tenth of lockproxy's CPU when
// only its Redis connections went through net.Conn.
//
// Its other methods are the connection's own. One goroutine reads at a
// time and one writes at a time, as with any net.Conn.
type Conn struct {
	net.Conn
	rc  syscall.RawConn
	net string // "tcp" or "unix", for errors

	// What the raw calls in flight work on: rd for Read and ReadOrWait,
	// wr for Write. readFn, waitFn and writeFn are the method values
	// RawConn calls, made once so that a read or write allocates
	// nothing.
	rd                      rawOp
	wr                      rawOp
	readFn, waitFn, writeFn func(fd uintptr) bool
}

// rawOp is one raw read or write: its buffer, what it did, and for
// ReadOrWait the release to call before parking and whether it parked.
type rawOp struct {
	p       []byte
	n       int
	errno   syscall.Errno
	release func()
	waited  bool
}

// New returns c as a *Conn when it is a TCP or Unix socket, c itself
// otherwise.
func New(c net.Conn) net.Conn {
	var sc syscall.Conn
	network := "tcp"
	switch x := c.(type) {
	case *net.TCPConn:
		sc = x
	case *net.UnixConn:
		sc, network = x, "unix"
	default:
		return c
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	s := &Conn{Conn: c, rc: rc, net: network}
	s.readFn, s.waitFn, s.writeFn = s.rawRead, s.rawWait, s.rawWrite
	return s
}

// Raw reports whether c is read and written raw (a *Conn).
func Raw(c net.Conn) bool {
	_, ok := c.(*Conn)
	return ok
}

// Readable reports whether c's socket holds data, has ended or has
// failed, without reading from it: false for an empty socket and for a
// connection that is not a *Conn.
func Readable(c net.Conn) bool {
	s, ok := c.(*Conn)
	if !ok {
		return false
	}
	readable := false
	err := s.rc.Read(func(fd uintptr) bool {
		readable = peek(fd) != syscall.EAGAIN
		return true
	})
	return readable || err != nil
}

// rawRead reads into rd.p what the socket holds; false (park) when it
// holds nothing.
func (s *Conn) rawRead(fd uintptr) bool {
	for {
		r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&s.rd.p[0])), uintptr(len(s.rd.p)))
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		s.rd.n, s.rd.errno = int(r), e
		return true
	}
}

// rawWait is rawRead that, the first time the socket holds nothing,
// releases rd's buffer before parking and reads nothing once woken.
func (s *Conn) rawWait(fd uintptr) bool {
	if s.rd.waited {
		return true
	}
	if s.rawRead(fd) {
		return true
	}
	s.rd.release()
	s.rd.waited = true
	return false
}

// rawWrite writes wr.p whole; false (park) when the socket is full.
func (s *Conn) rawWrite(fd uintptr) bool {
	for s.wr.n < len(s.wr.p) {
		r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&s.wr.p[s.wr.n])), uintptr(len(s.wr.p)-s.wr.n))
		switch e {
		case 0:
			s.wr.n += int(r)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			s.wr.errno = e
			return true
		}
	}
	return true
}

// Read implements net.Conn.
func (s *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.rd = rawOp{p: p}
	err := s.rc.Read(s.readFn)
	n, errno := s.rd.n, s.rd.errno
	s.rd = rawOp{}
	switch {
	case err != nil:
		return 0, s.opError("read", err)
	case errno != 0:
		return 0, s.opError("read", os.NewSyscallError("read", errno))
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// ReadOrWait reads what the socket holds now into p, or, when it holds
// nothing, calls release and parks until the poller says it is readable
// (or its read deadline passes), reading nothing then: an idle
// connection waits without a buffer.
func (s *Conn) ReadOrWait(p []byte, release func()) (int, error) {
	s.rd = rawOp{p: p, release: release}
	err := s.rc.Read(s.waitFn)
	n, errno, waited := s.rd.n, s.rd.errno, s.rd.waited
	s.rd = rawOp{}
	switch {
	case err != nil:
		return 0, s.opError("read", err)
	case errno != 0:
		return 0, s.opError("read", os.NewSyscallError("read", errno))
	case n == 0 && !waited:
		return 0, io.EOF
	}
	return n, nil
}

// Write implements net.Conn.
func (s *Conn) Write(p []byte) (int, error) {
	s.wr = rawOp{p: p}
	err := s.rc.Write(s.writeFn)
	n, errno := s.wr.n, s.wr.errno
	s.wr = rawOp{}
	switch {
	case err != nil:
		return n, s.opError("write", err)
	case errno != 0:
		return n, s.opError("write", os.NewSyscallError("write", errno))
	}
	return n, nil
}

// opError wraps err as net.Conn's methods do (RawConn's own errors come
// wrapped as a "raw-read" or "raw-write" operation).
func (s *Conn) opError(op string, err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		err = oe.Err
	}
	return &net.OpError{Op: op, Net: s.net, Source: s.LocalAddr(), Addr: s.RemoteAddr(), Err: err}
}

// SyscallConn implements syscall.Conn for a pool that checks an idle
// connection before it hands it out, as go-redis's does with a read whose
// function peeks at the socket through syscall.Recvfrom (MSG_PEEK,
// MSG_DONTWAIT), a call that enters the syscall state on every checkout.
// The RawConn it returns is the socket's, except that Read peeks first
// with a raw recvfrom and calls f only when the socket holds data, has
// ended or has an error: an empty socket, which such a check calls
// healthy, answers without f. Write and Control are the socket's.
func (s *Conn) SyscallConn() (syscall.RawConn, error) {
	return peekFirst{s.rc}, nil
}

// peekFirst is the RawConn of SyscallConn.
type peekFirst struct{ syscall.RawConn }

// Read calls f only when the socket is not merely empty.
func (p peekFirst) Read(f func(fd uintptr) bool) error {
	return p.RawConn.Read(func(fd uintptr) bool {
		if peek(fd) == syscall.EAGAIN {
			return true
		}
		return f(fd)
	})
}

// peek looks at the socket's next byte without taking it or waiting
// (a raw recvfrom, MSG_PEEK and MSG_DONTWAIT): EAGAIN when it holds
// nothing, 0 when it holds data or has ended.
func peek(fd uintptr) syscall.Errno {
	var b [1]byte
	_, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1,
		syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	return e
}
