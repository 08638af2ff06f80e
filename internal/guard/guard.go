// Package guard keeps the gateway's outbound connections to user-supplied
// addresses (http-log collectors, the applications upstream probe,
// targets) away from the process's own endpoints: the gateway admin API
// and Caddy's admin endpoint, and the gateway's proxy listeners. Reaching
// the first from inside would bypass admin authentication (Caddy's admin
// endpoint has none: an http-log endpoint of http://localhost:2019/stop
// stops the process); reaching the proxy from inside is a loop. They are
// kept away from link-local and cloud metadata addresses too (IsLinkLocal)
// unless the settings allow them: a target at 169.254.169.254 would hand
// the instance's cloud credentials to any proxy client. CheckHost refuses
// a configured literal one, Control a resolved one.
//
// The control plane registers the endpoints at start (Set). Two checks use
// them: CheckHostPort refuses a configured address that names one of them
// literally (validation, 400), and Dialer / WrapDial refuse a connection
// whose resolved peer is one of them (at dial time, after DNS, so that a
// hostname resolving to 127.0.0.1 cannot dodge the validation). A listener
// on 0.0.0.0 or :: is reached through any local address, so it forbids its
// port on every loopback, unspecified or local interface address.
//
// The package is process-wide and imports nothing of the gateway, so the
// plugin modules can use it without importing the admin side.
package guard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// ErrForbidden is the error of a refused dial or address.
var ErrForbidden = errors.New("the address is one of the gateway's own endpoints")

// endpoint is one registered control endpoint.
type endpoint struct {
	name string
	// TCP: port and the addresses it is bound to; anyLocal when bound to
	// an unspecified address (0.0.0.0, ::, empty host).
	port     uint16
	addrs    []netip.Addr
	anyLocal bool
	// Unix socket path.
	unix string
}

var (
	mu        sync.RWMutex
	endpoints = map[string][]endpoint{} // by name
)

// Set registers (or replaces) the control endpoint name at addresses, each
// "host:port" (a hostname is resolved now; "localhost" means loopback),
// "unix/path" or "unix//path" (Caddy's network address forms), or "" (none).
func Set(name string, addresses ...string) {
	var eps []endpoint
	for _, a := range addresses {
		if ep, ok := parse(name, a); ok {
			eps = append(eps, ep)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(eps) == 0 {
		delete(endpoints, name)
		return
	}
	endpoints[name] = eps
}

func parse(name, a string) (endpoint, bool) {
	a = strings.TrimSpace(a)
	if a == "" {
		return endpoint{}, false
	}
	for _, p := range []string{"unix//", "unix/", "unixgram/", "unixpacket/"} {
		if path, ok := strings.CutPrefix(a, p); ok {
			if p == "unix//" {
				path = "/" + path
			}
			return endpoint{name: name, unix: path}, true
		}
	}
	a = strings.TrimPrefix(strings.TrimPrefix(a, "tcp/"), "tcp4/")
	a = strings.TrimPrefix(a, "tcp6/")
	host, portStr, err := net.SplitHostPort(a)
	if err != nil {
		return endpoint{}, false
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return endpoint{}, false
	}
	ep := endpoint{name: name, port: uint16(port)}
	switch ip, err := netip.ParseAddr(strings.Trim(host, "[]")); {
	case host == "":
		ep.anyLocal = true
	case err == nil:
		ip = ip.Unmap()
		if ip.IsUnspecified() {
			ep.anyLocal = true
		}
		ep.addrs = []netip.Addr{ip}
	case isLocalName(host):
		ep.addrs = []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}
	default:
		ips, _ := net.LookupIP(host)
		for _, ip := range ips {
			if a, ok := netip.AddrFromSlice(ip); ok {
				ep.addrs = append(ep.addrs, a.Unmap())
			}
		}
		if len(ep.addrs) == 0 {
			return endpoint{}, false
		}
	}
	return ep, true
}

func isLocalName(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}

// isLocal reports whether ip reaches this machine: loopback, unspecified
// (dialing 0.0.0.0 connects locally) or one of its interface addresses.
func isLocal(ip netip.Addr) bool {
	if ip.IsLoopback() || ip.IsUnspecified() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if la, ok := netip.AddrFromSlice(n.IP); ok && la.Unmap() == ip {
				return true
			}
		}
	}
	return false
}

// forbiddenTCP names the endpoint ip:port reaches, or "".
func forbiddenTCP(ip netip.Addr, port uint16) string {
	ip = ip.Unmap()
	mu.RLock()
	defer mu.RUnlock()
	for _, eps := range endpoints {
		for _, ep := range eps {
			if ep.reaches(ip, port) {
				return ep.name
			}
		}
	}
	return ""
}

// reaches reports whether a connection to ip:port lands on the TCP
// endpoint ep.
func (ep endpoint) reaches(ip netip.Addr, port uint16) bool {
	if ep.unix != "" || ep.port != port {
		return false
	}
	if ep.anyLocal && isLocal(ip) {
		return true
	}
	for _, a := range ep.addrs {
		// Dialing the unspecified address reaches the loopback.
		if a == ip || (ip.IsUnspecified() && a.IsLoopback()) {
			return true
		}
	}
	return false
}

// Reaches reports whether a connection to peer (a resolved "ip:port", as
// a dialer's Control gets it) lands on a TCP listener bound at listen
// ("ip:port", or ":port" / an unspecified IP for every local address),
// by the rules of the control endpoints. The stream routes use it to
// refuse dialling their own listeners (a loop).
func Reaches(listen, peer string) bool {
	ap, err := netip.ParseAddrPort(peer)
	if err != nil {
		return false
	}
	ep, ok := parse("", listen)
	return ok && ep.reaches(ap.Addr().Unmap(), ap.Port())
}

func forbiddenUnix(path string) string {
	mu.RLock()
	defer mu.RUnlock()
	for _, eps := range endpoints {
		for _, ep := range eps {
			if ep.unix != "" && ep.unix == path {
				return ep.name
			}
		}
	}
	return ""
}

// CheckHostPort refuses a configured host and port that literally name a
// control endpoint (an IP address, localhost, or the unspecified address).
// Hostnames are not resolved here; the dial-time check covers them.
func CheckHostPort(host string, port int) error {
	if port < 0 || port > 65535 {
		return nil
	}
	host = strings.Trim(host, "[]")
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else if isLocalName(host) {
		ips = []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}
	}
	for _, ip := range ips {
		if name := forbiddenTCP(ip, uint16(port)); name != "" {
			return fmt.Errorf("must not be %s (%s)", name, net.JoinHostPort(host, strconv.Itoa(port)))
		}
	}
	return nil
}

// Control is a net.Dialer Control function that refuses connections to a
// control endpoint, and to a link-local or cloud metadata address unless
// AllowLinkLocal; address is the resolved peer (a name resolving there is
// refused before any packet is sent).
func Control(network, address string, _ syscall.RawConn) error {
	if strings.HasPrefix(network, "unix") {
		if name := forbiddenUnix(address); name != "" {
			return fmt.Errorf("%w: %s", ErrForbidden, name)
		}
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return nil
	}
	if err := forbiddenLinkLocal(ap.Addr()); err != nil {
		return err
	}
	if name := forbiddenTCP(ap.Addr(), ap.Port()); name != "" {
		return fmt.Errorf("%w: %s (%s)", ErrForbidden, name, address)
	}
	return nil
}

// Dialer returns d with Control set to refuse control endpoints (an
// existing Control still runs first).
func Dialer(d *net.Dialer) *net.Dialer {
	prev := d.Control
	d.Control = func(network, address string, c syscall.RawConn) error {
		if prev != nil {
			if err := prev(network, address, c); err != nil {
				return err
			}
		}
		return Control(network, address, c)
	}
	return d
}

// DialFunc is the shape of http.Transport.DialContext.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// WrapDial checks the peer of every connection dial makes and closes one
// that reached a control endpoint (or a link-local or metadata address,
// Control) before anything is sent, for transports whose dialer cannot be
// replaced.
func WrapDial(dial DialFunc) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		ra := conn.RemoteAddr()
		if ra == nil {
			return conn, nil
		}
		if err := Control(ra.Network(), ra.String(), nil); err != nil {
			conn.Close()
			return nil, err
		}
		return conn, nil
	}
}
