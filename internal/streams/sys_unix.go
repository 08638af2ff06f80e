//go:build unix

package streams

import (
	"io"
	"net"
	"os"
	"syscall"
)

// readPooled reads once from c into a buffer of copyBufs, which it takes
// only when c has something to read (honouring c's read deadline): an
// idle connection then holds no copy buffer (see copyWithin). The read is
// the socket's own recv inside the poller's readiness wait, one system
// call per chunk as c.Read makes. A zero-length read of c's end is
// io.EOF; the buffer is nil exactly when n is 0.
func readPooled(c net.Conn) (buf *[]byte, n int, err error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return readPooledBlocking(c)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return readPooledBlocking(c)
	}
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		b := copyBufs.Get().(*[]byte)
		for {
			n, rerr = syscall.Read(int(fd), *b)
			if rerr != syscall.EINTR {
				break
			}
		}
		if rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK {
			copyBufs.Put(b) // nothing yet: wait for readiness without it
			return false
		}
		if n > 0 {
			buf = b
		} else {
			n = 0
			copyBufs.Put(b)
		}
		return true
	})
	switch {
	case err != nil: // the wait's: deadline, closed connection
		return nil, 0, err
	case rerr != nil:
		return nil, 0, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError("read", rerr)}
	case n == 0:
		return nil, 0, io.EOF
	}
	return buf, n, nil
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
