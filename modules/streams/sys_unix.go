//go:build unix

package streams

import (
	"net"
	"syscall"
)

// waitReadable blocks until c has data, its end, or an error to read
// (honouring c's read deadline), without taking a buffer: an idle
// connection then holds no copy buffer (see copyWithin). A non-nil error
// is the wait's (deadline, closed connection).
func waitReadable(c net.Conn) error {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	var one [1]byte
	return rc.Read(func(fd uintptr) bool {
		// The socket is non-blocking: EAGAIN means nothing to read yet,
		// and rc.Read waits for readiness before calling again.
		_, _, err := syscall.Recvfrom(int(fd), one[:], syscall.MSG_PEEK)
		return err != syscall.EAGAIN && err != syscall.EWOULDBLOCK
	})
}

// openFileLimit is the process's open-file limit (RLIMIT_NOFILE, which
// the Go runtime raises to the hard limit at start), 0 when unknown.
func openFileLimit() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	return l.Cur
}
