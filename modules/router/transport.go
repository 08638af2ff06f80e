package router

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/caddy-gateway/gateway/internal/guard"
)

func init() {
	caddy.RegisterModule(Transport{})
}

// Transport is the service proxies' transport: Caddy's http transport
// (same settings, inline), whose connections are checked after they are
// made: one whose peer is the gateway admin API or Caddy's admin endpoint
// (package guard) is closed before anything is sent. A target's name that
// resolves there, which validation cannot see, never lets a proxied client
// talk to an admin endpoint.
type Transport struct {
	reverseproxy.HTTPTransport
}

// CaddyModule returns the Caddy module information.
func (Transport) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.reverse_proxy.transport.gateway_http",
		New: func() caddy.Module { return new(Transport) },
	}
}

// maxIdleConnsPerHost is the default of idle upstream connections kept
// per target. Caddy's default (32) is below a gateway's usual concurrency:
// at 50 client connections a CPU profile showed 13% of the gateway's CPU
// dialing (and guard-checking) fresh upstream connections. Traefik keeps
// 200.
const maxIdleConnsPerHost = 256

// Provision sets up Caddy's transport, then wraps its dialer: the guard,
// and the read and write timeouts (deadlineConn, instead of Caddy's
// wrapper, which moves the deadline on every read and write).
func (t *Transport) Provision(ctx caddy.Context) error {
	if t.KeepAlive == nil {
		t.KeepAlive = new(reverseproxy.KeepAlive)
	}
	if t.KeepAlive.MaxIdleConnsPerHost == 0 {
		t.KeepAlive.MaxIdleConnsPerHost = maxIdleConnsPerHost
	}
	read, write := time.Duration(t.ReadTimeout), time.Duration(t.WriteTimeout)
	t.ReadTimeout, t.WriteTimeout = 0, 0
	if err := t.HTTPTransport.Provision(ctx); err != nil {
		return err
	}
	if t.Transport == nil || t.Transport.DialContext == nil {
		return fmt.Errorf("gateway_http transport: Caddy's transport has no dialer to guard")
	}
	dial := guard.WrapDial(t.Transport.DialContext)
	t.Transport.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if read > 0 || write > 0 { // any conn: unix sockets too
			return newDeadlineConn(conn, read, write), nil
		}
		return conn, nil
	}
	return nil
}

// deadlineConn enforces the read and write timeouts of an upstream
// connection: a read (write) that makes no progress for the timeout
// fails. The deadline is moved only when it would move by more than a
// 64th of the timeout: setting a socket deadline costs a runtime timer
// update, which at one per read and write was a visible share of the
// proxy's CPU. A stalled read so fails after between 63/64 of the
// timeout and the timeout.
type deadlineConn struct {
	net.Conn
	read, write deadline
}

func newDeadlineConn(c net.Conn, read, write time.Duration) *deadlineConn {
	return &deadlineConn{Conn: c, read: deadline{timeout: read}, write: deadline{timeout: write}}
}

// deadline is one direction's timeout and the deadline last set.
type deadline struct {
	timeout time.Duration
	set     time.Time
}

// next is the deadline to set now, if it must move.
func (d *deadline) next() (time.Time, bool) {
	if d.timeout <= 0 {
		return time.Time{}, false
	}
	by := time.Now().Add(d.timeout)
	return by, by.Sub(d.set) > d.timeout/64
}

// move sets the deadline now, with set (the conn's SetReadDeadline or
// SetWriteDeadline), if it must move.
func (d *deadline) move(set func(time.Time) error) error {
	by, ok := d.next()
	if !ok {
		return nil
	}
	if err := set(by); err != nil {
		return err
	}
	d.set = by
	return nil
}

func (c *deadlineConn) Read(b []byte) (int, error) {
	if err := c.read.move(c.Conn.SetReadDeadline); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *deadlineConn) Write(b []byte) (int, error) {
	if err := c.write.move(c.Conn.SetWriteDeadline); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

// Interface guards
var (
	_ caddy.Provisioner                      = (*Transport)(nil)
	_ caddy.CleanerUpper                     = (*Transport)(nil)
	_ reverseproxy.TLSTransport              = (*Transport)(nil)
	_ reverseproxy.H2CTransport              = (*Transport)(nil)
	_ reverseproxy.RequestHeaderOpsTransport = (*Transport)(nil)
)
