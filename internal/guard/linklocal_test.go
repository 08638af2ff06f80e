package guard

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

func TestIsLinkLocal(t *testing.T) {
	for _, c := range []struct {
		ip   string
		want bool
	}{
		{"169.254.169.254", true},
		{"169.254.0.1", true},
		{"::ffff:169.254.169.254", true},
		{"64:ff9b::a9fe:a9fe", true},
		{"fe80::1", true},
		{"fe80::1%eth0", true},
		{"febf::1", true},
		{"fd00:ec2::254", true},
		{"100.100.100.200", true},
		{"169.253.255.255", false},
		{"169.255.0.1", false},
		{"fec0::1", false},
		{"fd00:ec2::253", false},
		{"100.100.100.201", false},
		{"127.0.0.1", false},
		{"::1", false},
		{"10.0.0.1", false},
	} {
		if got := IsLinkLocal(netip.MustParseAddr(c.ip)); got != c.want {
			t.Errorf("IsLinkLocal(%s) = %v", c.ip, got)
		}
	}
}

func TestCheckHostLinkLocal(t *testing.T) {
	defer AllowLinkLocal(false)
	for _, h := range []string{"169.254.169.254", "[fe80::1]", "fd00:ec2::254", "100.100.100.200", "::ffff:169.254.169.254"} {
		AllowLinkLocal(false)
		if err := CheckHost(h); err == nil {
			t.Errorf("CheckHost(%s) accepted", h)
		}
		AllowLinkLocal(true)
		if err := CheckHost(h); err != nil {
			t.Errorf("CheckHost(%s) with link-local allowed: %v", h, err)
		}
	}
	AllowLinkLocal(false)
	for _, h := range []string{"127.0.0.1", "example.com", "10.1.2.3", "2001:db8::1"} {
		if err := CheckHost(h); err != nil {
			t.Errorf("CheckHost(%s): %v", h, err)
		}
	}
}

// errNotDialled ends every dial the guard lets through: no test sends a
// packet anywhere but the loopback.
var errNotDialled = errors.New("test: not dialled")

// TestDialerLinkLocal dials names that resolve to link-local and metadata
// addresses through Dialer, with a resolver answering from memory. The
// guard must refuse each resolved address; whatever it lets through is
// recorded and refused by the test's own Control, so nothing is sent.
func TestDialerLinkLocal(t *testing.T) {
	defer AllowLinkLocal(false)
	answers := map[string][]netip.Addr{
		"metadata.test.": {netip.MustParseAddr("169.254.169.254")},
		"ec2.test.":      {netip.MustParseAddr("fd00:ec2::254")},
		"alibaba.test.":  {netip.MustParseAddr("100.100.100.200")},
		"mapped.test.":   {netip.MustParseAddr("::ffff:169.254.169.254")},
		"plain.test.":    {netip.MustParseAddr("127.0.0.1")},
	}
	var mu sync.Mutex
	var reached []string
	dialer := func() *net.Dialer {
		d := Dialer(&net.Dialer{Resolver: memoryResolver(answers)})
		guarded := d.Control
		d.Control = func(network, address string, c syscall.RawConn) error {
			if err := guarded(network, address, c); err != nil {
				return err
			}
			mu.Lock()
			reached = append(reached, address)
			mu.Unlock()
			return errNotDialled
		}
		return d
	}
	for _, host := range []string{"metadata.test", "ec2.test", "alibaba.test", "mapped.test"} {
		AllowLinkLocal(false)
		_, err := dialer().DialContext(context.Background(), "tcp", net.JoinHostPort(host, "80"))
		if !errors.Is(err, ErrLinkLocal) {
			t.Errorf("dial %s: %v, want ErrLinkLocal", host, err)
		}
		AllowLinkLocal(true)
		if _, err := dialer().DialContext(context.Background(), "tcp", net.JoinHostPort(host, "80")); !errors.Is(err, errNotDialled) {
			t.Errorf("dial %s with link-local allowed: %v, want it let through", host, err)
		}
	}
	AllowLinkLocal(false)
	if _, err := dialer().DialContext(context.Background(), "tcp", "plain.test:80"); !errors.Is(err, errNotDialled) {
		t.Errorf("dial plain.test: %v, want it let through", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reached) != 5 {
		t.Errorf("let through %v, want the four allowed link-local ones and plain.test", reached)
	}
	for _, a := range reached[:4] {
		if ap := netip.MustParseAddrPort(a); !IsLinkLocal(ap.Addr()) {
			t.Errorf("let through %s", a)
		}
	}
}

// TestWrapDialLinkLocal hands WrapDial a dialer whose connections claim a
// link-local peer (the proxy's transport checks its connections' peers):
// each is closed and refused.
func TestWrapDialLinkLocal(t *testing.T) {
	defer AllowLinkLocal(false)
	for _, peer := range []string{"169.254.169.254:80", "[fe80::1%eth0]:80", "[fd00:ec2::254]:80", "100.100.100.200:80"} {
		var conn *peerConn
		dial := WrapDial(func(context.Context, string, string) (net.Conn, error) {
			a, b := net.Pipe()
			b.Close()
			conn = &peerConn{Conn: a, peer: net.TCPAddrFromAddrPort(netip.MustParseAddrPort(peer))}
			return conn, nil
		})
		AllowLinkLocal(false)
		if _, err := dial(context.Background(), "tcp", "target.test:80"); !errors.Is(err, ErrLinkLocal) {
			t.Errorf("peer %s: %v, want ErrLinkLocal", peer, err)
		}
		if !conn.closed {
			t.Errorf("peer %s: the refused connection was not closed", peer)
		}
		AllowLinkLocal(true)
		c, err := dial(context.Background(), "tcp", "target.test:80")
		if err != nil {
			t.Errorf("peer %s with link-local allowed: %v", peer, err)
		} else {
			c.Close()
		}
	}
}

type peerConn struct {
	net.Conn
	peer   net.Addr
	closed bool
}

func (c *peerConn) RemoteAddr() net.Addr { return c.peer }
func (c *peerConn) Close() error         { c.closed = true; return c.Conn.Close() }

// memoryResolver is a Go resolver whose DNS server is in memory (a pipe,
// DNS over TCP framing): it answers A and AAAA queries from answers.
func memoryResolver(answers map[string][]netip.Addr) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		client, server := net.Pipe()
		go serveDNS(server, answers)
		return client, nil
	}}
}

func serveDNS(conn net.Conn, answers map[string][]netip.Addr) {
	defer conn.Close()
	for {
		var n [2]byte
		if _, err := io.ReadFull(conn, n[:]); err != nil {
			return
		}
		req := make([]byte, binary.BigEndian.Uint16(n[:]))
		if _, err := io.ReadFull(conn, req); err != nil {
			return
		}
		var p dnsmessage.Parser
		h, err := p.Start(req)
		if err != nil {
			return
		}
		q, err := p.Question()
		if err != nil {
			return
		}
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true})
		b.EnableCompression()
		_ = b.StartQuestions()
		_ = b.Question(q)
		_ = b.StartAnswers()
		rh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}
		for _, a := range answers[q.Name.String()] {
			switch {
			case q.Type == dnsmessage.TypeA && a.Is4():
				_ = b.AResource(rh, dnsmessage.AResource{A: a.As4()})
			case q.Type == dnsmessage.TypeAAAA && !a.Is4():
				_ = b.AAAAResource(rh, dnsmessage.AAAAResource{AAAA: a.As16()})
			}
		}
		msg, err := b.Finish()
		if err != nil {
			return
		}
		binary.BigEndian.PutUint16(n[:], uint16(len(msg)))
		if _, err := conn.Write(append(n[:], msg...)); err != nil {
			return
		}
	}
}
