package router

import (
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/caddy-gateway/gateway/modules/guard"
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

// Provision sets up Caddy's transport, then wraps its dialer.
func (t *Transport) Provision(ctx caddy.Context) error {
	if t.KeepAlive == nil {
		t.KeepAlive = new(reverseproxy.KeepAlive)
	}
	if t.KeepAlive.MaxIdleConnsPerHost == 0 {
		t.KeepAlive.MaxIdleConnsPerHost = maxIdleConnsPerHost
	}
	if err := t.HTTPTransport.Provision(ctx); err != nil {
		return err
	}
	if t.Transport == nil || t.Transport.DialContext == nil {
		return fmt.Errorf("gateway_http transport: Caddy's transport has no dialer to guard")
	}
	t.Transport.DialContext = guard.WrapDial(t.Transport.DialContext)
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner                      = (*Transport)(nil)
	_ caddy.CleanerUpper                     = (*Transport)(nil)
	_ reverseproxy.TLSTransport              = (*Transport)(nil)
	_ reverseproxy.H2CTransport              = (*Transport)(nil)
	_ reverseproxy.RequestHeaderOpsTransport = (*Transport)(nil)
)
