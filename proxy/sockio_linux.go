package proxy

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// sockIO reads and writes a connection's socket with raw read(2) and
// write(2) on Go's poller (syscall.RawConn): the socket is non-blocking,
// so a call returns at once with data, EAGAIN (then the goroutine parks
// until the poller says the socket is ready, as net.Conn does) or an
// error. net.Conn's own Read and Write enter the scheduler's syscall state
// around every call (entersyscall), and when every P has been idle that
// wakes the runtime's monitor thread (sysmon) with a futex each time: on
// a proxy that spends most of its life waiting for the network, one more
// syscall and thread wake-up per read and write.
type sockIO struct {
	c   net.Conn
	rc  syscall.RawConn
	net string // "tcp" or "unix", for errors
}

// newSockIO returns the reader and writer packets of c go through: c
// itself unless it is a TCP or Unix socket.
func newSockIO(c net.Conn) io.ReadWriter {
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
	return &sockIO{c: c, rc: rc, net: network}
}

func (s *sockIO) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := s.rc.Read(func(fd uintptr) bool {
		for {
			r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false
			}
			n, errno = int(r), e
			return true
		}
	})
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

// readOrWait implements waitReader: it reads what the socket holds now
// into p, or, when it holds nothing, calls release and parks until the
// poller says it is readable (or its read deadline passes), reading
// nothing then: an idle connection waits without a buffer.
func (s *sockIO) readOrWait(p []byte, release func()) (int, error) {
	var n int
	var errno syscall.Errno
	waited := false
	err := s.rc.Read(func(fd uintptr) bool {
		if waited {
			return true
		}
		for {
			r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				release()
				waited = true
				return false
			}
			n, errno = int(r), e
			return true
		}
	})
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

func (s *sockIO) Write(p []byte) (int, error) {
	var n int
	var errno syscall.Errno
	err := s.rc.Write(func(fd uintptr) bool {
		for n < len(p) {
			r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[n])), uintptr(len(p)-n))
			switch e {
			case 0:
				n += int(r)
			case syscall.EINTR:
			case syscall.EAGAIN:
				return false
			default:
				errno = e
				return true
			}
		}
		return true
	})
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
func (s *sockIO) opError(op string, err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		err = oe.Err
	}
	return &net.OpError{Op: op, Net: s.net, Source: s.c.LocalAddr(), Addr: s.c.RemoteAddr(), Err: err}
}
