//go:build !unix

package streams

import "net"

// readPooled reads once from c into a buffer of copyBufs, held while the
// read waits where the socket's readiness cannot be awaited without one.
func readPooled(c net.Conn) (*[]byte, int, error) { return readPooledBlocking(c) }

// openFileLimit is 0 (unknown) where there is no RLIMIT_NOFILE.
func openFileLimit() uint64 { return 0 }
