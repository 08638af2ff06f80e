package gwctx

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// WriteError answers the client itself with a JSON body {"error": msg}: the
// shape of every response the gateway makes (plugins' 401/403/413/429, the
// router's 404, proxy errors).
func WriteError(w http.ResponseWriter, status int, msg string) {
	b, _ := json.Marshal(map[string]string{"error": msg})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del("Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// ClientIP is the request's client address: the router's decision (which
// honours the gateway's trusted_proxies) when the request went through the
// gateway router, else Caddy's client_ip (the server's trusted_proxies), else
// the peer address.
func ClientIP(r *http.Request) string {
	if info := From(r); info != nil && info.ClientIP != "" {
		return info.ClientIP
	}
	if ip, ok := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string); ok && ip != "" {
		return ip
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// IsEventStream reports whether h is the header of an event stream
// (text/event-stream, parameters allowed): a response delivered event by
// event that may never end, which the proxy flushes as it comes and no
// plugin may hold back whole. It allocates nothing.
func IsEventStream(h http.Header) bool {
	ct := h.Get("Content-Type")
	const sse = "text/event-stream"
	return len(ct) >= len(sse) && strings.EqualFold(ct[:len(sse)], sse) &&
		(len(ct) == len(sse) || ct[len(sse)] == ';' || ct[len(sse)] == ' ')
}
