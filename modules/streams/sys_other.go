//go:build !unix

package streams

import "net"

// waitReadable does not wait where the socket cannot be peeked: the read
// that follows waits, holding its buffer.
func waitReadable(net.Conn) error { return nil }

// openFileLimit is 0 (unknown) where there is no RLIMIT_NOFILE.
func openFileLimit() uint64 { return 0 }
