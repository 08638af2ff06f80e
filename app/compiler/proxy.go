package compiler

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/headers"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/caddy-gateway/gateway/internal/lb"
	"github.com/caddy-gateway/gateway/modules/gwproxy"
	"github.com/caddy-gateway/gateway/modules/router"
	"github.com/caddy-gateway/gateway/storage"
)

// streamCloseDelay keeps proxied WebSockets and other hijacked streams open
// across config reloads (Caddy closes them when the old proxy is cleaned up
// otherwise; caddy issues #5471, #7222).
const streamCloseDelay = 24 * time.Hour

// passive health: failed proxied connections count against a target.
const (
	passiveFailDuration = 10 * time.Second
	passiveMaxFails     = 2
)

// ProxyCache holds the service proxies a compile produced, by service id,
// with the key of the rows each was compiled from (proxyKey). The next
// compile reuses the bytes of every service whose rows are the same: at
// 5,000 services encoding every proxy on every change cost more than the
// change itself, and the same bytes let the proxy pool keep the proxy.
type ProxyCache map[int64]CompiledProxy

// CompiledProxy is one service's compiled proxy and its rows' key.
type CompiledProxy struct {
	key string
	raw json.RawMessage
}

// compileProxies compiles the proxies of the services ids, reusing prev's
// bytes where the rows are unchanged; out.Proxies gets the new cache.
func compileProxies(ids []int64, idx *snapIndex, prev ProxyCache, out *Compiled) (router.ServiceProxies, error) {
	proxies := make(router.ServiceProxies, len(ids))
	out.Proxies = make(ProxyCache, len(ids))
	var buf []byte
	for _, id := range ids {
		svc, ok := idx.services[id]
		if !ok {
			return nil, fmt.Errorf("a route references service %d, which does not exist", id)
		}
		targets := idx.targets[id]
		buf = proxyKey(buf[:0], svc, targets)
		c, ok := prev[id]
		if !ok || c.key != string(buf) {
			raw, err := compileProxy(svc, targets)
			if err != nil {
				return nil, err
			}
			c = CompiledProxy{key: string(buf), raw: raw}
		}
		proxies[id] = c.raw
		out.Proxies[id] = c
	}
	return proxies, nil
}

// proxyKey appends to buf what compileProxy reads of a service and its
// targets, with the rows' update stamps (a field added to compileProxy
// but forgotten here still changes a stamp when it is written). Strings
// are length-prefixed.
func proxyKey(buf []byte, svc *storage.Service, targets []storage.Target) []byte {
	str := func(s string) {
		buf = strconv.AppendInt(buf, int64(len(s)), 10)
		buf = append(buf, ':')
		buf = append(buf, s...)
	}
	num := func(n int64) {
		buf = strconv.AppendInt(buf, n, 10)
		buf = append(buf, ',')
	}
	num(svc.ID)
	num(svc.UpdatedAt.UnixNano())
	str(svc.Protocol)
	num(svc.ConnectTimeoutMS)
	num(svc.ReadTimeoutMS)
	num(svc.WriteTimeoutMS)
	num(int64(svc.Retries))
	str(svc.LBAlgorithm)
	if svc.TLSSNI != nil {
		str(*svc.TLSSNI)
	} else {
		buf = append(buf, '-')
	}
	for i := range targets {
		t := &targets[i]
		buf = append(buf, '|')
		num(t.ID)
		num(t.UpdatedAt.UnixNano())
		str(t.Host)
		num(int64(t.Port))
		num(int64(t.Weight))
		if t.Enabled {
			buf = append(buf, 'e')
		}
	}
	return buf
}

// compileProxy is the reverse_proxy handler config of one service
// (without its module key: it goes by reference, see
// router.ServiceProxies): its live
// targets, the gateway transport (Caddy's http transport with guarded
// dials) with the service's timeouts, the gateway selection policy, passive
// health, and the Host header the router decides per request.
//
// Every gateway change compiles every routed service's proxy, so the
// module objects are encoded once each (moduleObject), not through
// caddyconfig.JSONModuleObject's decode and re-encode.
func compileProxy(svc *storage.Service, targets []storage.Target) (json.RawMessage, error) {
	addrs, weights := liveTargets(targets)
	ups := make(reverseproxy.UpstreamPool, 0, len(addrs))
	for _, a := range addrs {
		ups = append(ups, &reverseproxy.Upstream{Dial: a})
	}
	transport := &router.Transport{HTTPTransport: reverseproxy.HTTPTransport{
		DialTimeout:           ms(svc.ConnectTimeoutMS),
		ResponseHeaderTimeout: ms(svc.ReadTimeoutMS),
		ReadTimeout:           ms(svc.ReadTimeoutMS),
		WriteTimeout:          ms(svc.WriteTimeoutMS),
	}}
	grpc := IsGRPC(svc.Protocol)
	if grpc {
		// HTTP/2 only: prior knowledge without TLS (h2c), ALPN h2 with it.
		// The connection carries many calls, some of them long streams:
		// a read or write timeout on it would end every call on it when
		// one stream is quiet. The call's deadline (grpc-timeout, capped
		// by read_timeout_ms) bounds each call instead (gwproxy).
		transport.Versions = []string{"h2c"}
		transport.ReadTimeout, transport.WriteTimeout = 0, 0
		transport.ResponseHeaderTimeout = 0
	}
	if svc.Protocol == "https" || svc.Protocol == "grpcs" {
		transport.TLS = &reverseproxy.TLSConfig{}
		if svc.TLSSNI != nil {
			transport.TLS.ServerName = *svc.TLSSNI
		}
		if grpc {
			transport.Versions = []string{"2"}
		}
	}
	policy := &router.Selection{Balancer: lb.Balancer{Algorithm: svc.LBAlgorithm, ServiceID: svc.ID}}
	if svc.LBAlgorithm == "weighted" {
		policy.Weights = weights
	}
	transportRaw, err := moduleObject(transport, "protocol", "gateway_http")
	if err != nil {
		return nil, err
	}
	policyRaw, err := moduleObject(policy, "policy", "gateway")
	if err != nil {
		return nil, err
	}
	h := &reverseproxy.Handler{
		Upstreams:    ups,
		TransportRaw: transportRaw,
		LoadBalancing: &reverseproxy.LoadBalancing{
			SelectionPolicyRaw: policyRaw,
			Retries:            int(svc.Retries),
		},
		HealthChecks: &reverseproxy.HealthChecks{Passive: &reverseproxy.PassiveHealthChecks{
			FailDuration: caddy.Duration(passiveFailDuration),
			MaxFails:     passiveMaxFails,
		}},
		Headers: &headers.Handler{Request: &headers.HeaderOps{
			Set: http.Header{"Host": {router.UpstreamHostHeader}},
		}},
		StreamCloseDelay: caddy.Duration(streamCloseDelay),
	}
	var v any = h
	if grpc {
		// gwproxy's gRPC settings, beside reverse_proxy's fields
		v = grpcProxy{h, &gwproxy.GRPC{MaxTimeout: ms(svc.ReadTimeoutMS)}}
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding the proxy of service %d: %w", svc.ID, err)
	}
	return raw, nil
}

// grpcProxy is the proxy config of a gRPC service: reverse_proxy's
// fields and gwproxy's gRPC settings.
type grpcProxy struct {
	*reverseproxy.Handler
	GRPC *gwproxy.GRPC `json:"grpc"`
}

// IsGRPC reports whether a service protocol is one of the gRPC ones
// (grpc: h2c, grpcs: HTTP/2 over TLS).
func IsGRPC(protocol string) bool { return protocol == "grpc" || protocol == "grpcs" }

// liveTargets are the dial addresses of the targets that take traffic (weight
// 0 or enabled false takes a target out), with their summed weights.
func liveTargets(targets []storage.Target) (addrs []string, weights map[string]int) {
	weights = map[string]int{}
	for _, t := range targets {
		if !t.Enabled || t.Weight <= 0 {
			continue
		}
		if _, dup := weights[t.Addr()]; !dup {
			addrs = append(addrs, t.Addr())
		}
		weights[t.Addr()] += int(t.Weight)
	}
	return addrs, weights
}

// ms is a Caddy duration of n milliseconds; 0 (no timeout given) leaves
// Caddy's default.
func ms(n int64) caddy.Duration {
	if n <= 0 {
		return 0
	}
	return caddy.Duration(time.Duration(n) * time.Millisecond)
}
