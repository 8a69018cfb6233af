//go:build linux && (amd64 || arm64)

package proxy

import (
	"syscall"
	"unsafe"
)

// peekRecv is recvfrom(fd, buf, MSG_PEEK|MSG_DONTWAIT) as a raw system
// call: it never blocks, so it need not tell the scheduler it is entering
// a system call, which for syscall.Recvfrom costs more than the call
// itself (a thread wake-up) and ran before every replica-routed read.
func peekRecv(fd uintptr, buf []byte) (int, error) {
	n, _, errno := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)),
		uintptr(syscall.MSG_PEEK|syscall.MSG_DONTWAIT), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}
