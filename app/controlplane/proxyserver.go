package controlplane

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"go.uber.org/zap"
	"golang.org/x/net/http2"

	"github.com/caddy-gateway/gateway/internal/guard"
	"github.com/caddy-gateway/gateway/internal/gwctx"
)

// proxyListener is one of the gateway's proxy listeners with its server. It
// lives for the process, not for a config: a mutation swaps the router the
// server calls, never the server, so no connection or request is dropped.
type proxyListener struct {
	addr string
	tls  bool
	ln   net.Listener
	srv  *http.Server
	// h3 serves HTTP/3 on udp, the HTTPS listener's port (nil when the
	// port could not be bound for UDP).
	h3  *http3.Server
	udp net.PacketConn
}

func (l *proxyListener) shutdown(ctx context.Context) {
	if l.h3 != nil {
		go func() {
			if err := l.h3.Shutdown(ctx); err != nil {
				_ = l.h3.Close()
			}
			_ = l.udp.Close()
		}()
	}
	if err := l.srv.Shutdown(ctx); err != nil {
		_ = l.srv.Close()
	}
}

// closeNow closes a listener that never served.
func (l *proxyListener) closeNow() {
	_ = l.ln.Close()
	if l.udp != nil {
		_ = l.udp.Close()
	}
}

func listenerKey(addr string, isTLS bool) string {
	if isTLS {
		return "https " + addr
	}
	return "http " + addr
}

// ensureListeners binds the wanted listeners that are not bound yet and
// closes (gracefully) those no longer wanted. A bind failure leaves
// everything as it was.
func (cp *ControlPlane) ensureListeners(httpAddr, httpsAddr string, httpsEnabled bool) error {
	cp.lnMu.Lock()
	defer cp.lnMu.Unlock()
	want := map[string]bool{}
	if httpAddr != "" {
		want[listenerKey(httpAddr, false)] = false
	}
	if httpsEnabled && httpsAddr != "" {
		want[listenerKey(httpsAddr, true)] = true
	}
	var opened []*proxyListener
	for k, isTLS := range want {
		if _, ok := cp.listeners[k]; ok {
			continue
		}
		addr := httpAddr
		if isTLS {
			addr = httpsAddr
		}
		l, err := cp.listen(addr, isTLS)
		if err != nil {
			for _, o := range opened {
				o.closeNow()
			}
			return err
		}
		opened = append(opened, l)
	}
	for _, l := range opened {
		cp.listeners[listenerKey(l.addr, l.tls)] = l
		go cp.serve(l)
	}
	changed := len(opened) > 0
	for k, l := range cp.listeners {
		if _, ok := want[k]; !ok {
			changed = true
			delete(cp.listeners, k)
			go func(l *proxyListener) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				l.shutdown(ctx)
			}(l)
		}
	}
	if changed { // not at every reload: most leave the listeners as they are
		cp.guardListenersLocked()
	}
	return nil
}

// ownProxyListener is the name under which the proxy listeners are
// registered with package guard.
const ownProxyListener = "this gateway's own proxy listener (a loop)"

// guardListenersLocked registers the bound proxy listeners with package
// guard (cp.lnMu held): a target, health check or http-log collector that
// reaches one is refused. A route whose service targets the gateway itself
// sent each request round again with one more connection pair held, some
// 250 times until its forwarded headers passed the header limit: 500 open
// descriptors and 800 goroutines for about a second per client request.
func (cp *ControlPlane) guardListenersLocked() {
	addrs := make([]string, 0, len(cp.listeners))
	for _, l := range cp.listeners {
		addrs = append(addrs, l.ln.Addr().String())
	}
	guard.Set(ownProxyListener, addrs...)
}

func (cp *ControlPlane) listen(addr string, isTLS bool) (*proxyListener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		kind := "http_listen"
		if isTLS {
			kind = "https_listen"
		}
		return nil, fmt.Errorf("%s: %w", kind, err)
	}
	l := &proxyListener{addr: addr, tls: isTLS, ln: ln}
	l.srv = &http.Server{
		Handler:           cp.ProxyHandler(),
		MaxHeaderBytes:    cp.Boot().MaxHeaderBytes,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       5 * time.Minute,
		ErrorLog:          zap.NewStdLog(cp.logger.Named("proxy")),
	}
	if !isTLS {
		if err := cp.enableH2C(l.srv); err != nil {
			_ = ln.Close()
			return nil, fmt.Errorf("http_listen: %w", err)
		}
	}
	if isTLS {
		l.srv.TLSConfig = &tls.Config{GetConfigForClient: cp.tlsConfigForClient}
		cp.listenHTTP3(l)
	}
	cp.logger.Info("gateway proxy listening", zap.String("address", ln.Addr().String()), zap.Bool("tls", isTLS))
	return l, nil
}

// enableH2C sets srv up for cleartext HTTP/2 with prior knowledge (the
// client starts with HTTP/2's preface, as gRPC clients without TLS do),
// served while the h2c setting is on: the listener lives for the process
// and the setting changes with any config, so it is read per connection.
// With the setting off, a connection that opens with the preface is
// closed, as a server without h2c would drop it. An HTTP/1.1 Upgrade to
// h2c is never taken (it is not how gRPC clients start, and upgrading
// mid-request is a smuggling risk).
func (cp *ControlPlane) enableH2C(srv *http.Server) error {
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	if err := http2.ConfigureServer(srv, &http2.Server{IdleTimeout: srv.IdleTimeout}); err != nil {
		return fmt.Errorf("setting up h2c: %w", err)
	}
	const key = "unencrypted_http2" // net/http's TLSNextProto key of prior-knowledge HTTP/2
	serveH2C := srv.TLSNextProto[key]
	if serveH2C == nil {
		return errors.New("setting up h2c: the HTTP/2 server registers no cleartext handler")
	}
	srv.TLSNextProto[key] = func(hs *http.Server, c *tls.Conn, h http.Handler) {
		if !cp.h2c.Load() {
			_ = c.NetConn().Close()
			return
		}
		serveH2C(hs, c, h)
	}
	// ConfigureServer prepared TLS settings this listener never uses.
	srv.TLSConfig = nil
	return nil
}

// tlsConfigForClient is the HTTPS listener's TLS config for a handshake:
// the tls app's.
func (cp *ControlPlane) tlsConfigForClient(hello *tls.ClientHelloInfo) (*tls.Config, error) {
	if tc := cp.tlsConfig.Load(); tc != nil {
		// The tls app's config picks a connection policy per
		// handshake in its own GetConfigForClient, which Go does
		// not call on a config returned from ours.
		if tc.GetConfigForClient != nil {
			return tc.GetConfigForClient(hello)
		}
		return tc, nil
	}
	return nil, errors.New("gateway HTTPS is not configured")
}

// errHTTP3Off refuses QUIC handshakes while the http3 setting is off.
var errHTTP3Off = errors.New("HTTP/3 is turned off (settings.http3)")

// listenHTTP3 binds UDP on the HTTPS listener's port and sets up HTTP/3
// there, with the same handler and certificates. Like the TCP listener,
// it lives for the process: QUIC connections outlive config changes. The
// http3 setting is read per handshake (off: refused, and no Alt-Svc). A
// port that cannot be bound for UDP leaves the listener HTTP/1.1 and
// HTTP/2 only (logged).
func (cp *ControlPlane) listenHTTP3(l *proxyListener) {
	udp, err := net.ListenPacket("udp", l.ln.Addr().String())
	if err != nil {
		cp.logger.Error("HTTP/3 not served: binding UDP", zap.String("address", l.ln.Addr().String()), zap.Error(err))
		return
	}
	l.udp = udp
	l.h3 = &http3.Server{
		Handler:        cp.ProxyHandler(),
		MaxHeaderBytes: cp.Boot().MaxHeaderBytes,
		IdleTimeout:    5 * time.Minute,
		TLSConfig: http3.ConfigureTLSConfig(&tls.Config{GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			if !cp.http3.Load() {
				return nil, errHTTP3Off
			}
			return cp.tlsConfigForClient(hello)
		}}),
	}
	port := l.ln.Addr().(*net.TCPAddr).Port
	altSvc := []string{`h3=":` + strconv.Itoa(port) + `"; ma=2592000`}
	h := l.srv.Handler
	l.srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cp.http3.Load() {
			w.Header()["Alt-Svc"] = altSvc
		}
		h.ServeHTTP(w, r)
	})
}

func (cp *ControlPlane) serve(l *proxyListener) {
	if l.h3 != nil {
		go func() {
			if err := l.h3.Serve(l.udp); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, quic.ErrServerClosed) {
				cp.logger.Error("HTTP/3 server stopped", zap.String("address", l.addr), zap.Error(err))
			}
		}()
	}
	var err error
	if l.tls {
		// ServeTLS, not Serve on a TLS listener: it sets up HTTP/2 for the
		// connections that negotiate h2.
		err = l.srv.ServeTLS(l.ln, "", "")
	} else {
		err = l.srv.Serve(l.ln)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		cp.logger.Error("proxy server stopped", zap.String("address", l.addr), zap.Error(err))
	}
}

// ProxyAddr is the bound address of the HTTP (or HTTPS) proxy listener.
func (cp *ControlPlane) ProxyAddr(isTLS bool) string {
	cp.lnMu.Lock()
	defer cp.lnMu.Unlock()
	for _, l := range cp.listeners {
		if l.tls == isTLS {
			return l.ln.Addr().String()
		}
	}
	return ""
}

// ProxyHandler is the handler the proxy listeners serve, for in-process
// benchmarks of the whole proxy path (router, plugin chain, service proxy,
// request record and metrics) without a client connection.
func (cp *ControlPlane) ProxyHandler() http.Handler {
	return &proxyHandler{cp: cp, srv: &caddyhttp.Server{}}
}

// proxyHandler serves proxied traffic with whatever router is live.
type proxyHandler struct {
	cp  *ControlPlane
	srv *caddyhttp.Server // zero value: what Caddy's handlers expect in the context
}

func (h *proxyHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// ACME HTTP-01 challenges for the gateway's certificates (and any the
	// tls app started) come before the routes.
	if ta := h.cp.tlsApp.Load(); ta != nil && ta.HandleHTTPChallenge(w, r) {
		return
	}
	// The request's gateway state and its recording writer: one allocation.
	st := &requestState{info: gwctx.Info{Start: time.Now(), RecordBuilt: true}}
	st.rw.ResponseWriter = w
	st.rw.Sanitize = guard.DropAdminSetCookies
	info, rw := &st.info, &st.rw
	var gw *gwctx.GRPCWriter
	if ct := r.Header.Get("Content-Type"); gwctx.IsGRPCContentType(ct) {
		// The gateway's own answers to a gRPC call are gRPC statuses.
		gw = gwctx.NewGRPCWriter(w, info, ct)
		st.rw.ResponseWriter = gw
		info.GRPC = true
	}
	r = gwctx.With(r, info)
	repl := caddy.NewReplacer()
	r = caddyhttp.PrepareRequest(r, repl, rw, h.srv)

	var err error
	if rt := h.cp.router.Load(); rt != nil {
		err = rt.ServeHTTP(rw, r, nil)
	} else {
		err = caddyhttp.Error(http.StatusServiceUnavailable, errors.New("gateway is starting"))
	}
	if err != nil && rw.Status == 0 {
		status := http.StatusInternalServerError
		msg := "internal error"
		var he caddyhttp.HandlerError
		if errors.As(err, &he) {
			status = he.StatusCode
			// 5xx say what happened, not which address failed how.
			msg = http.StatusText(status)
			if he.Err != nil && status < 500 {
				msg = he.Err.Error()
			}
		}
		gwctx.WriteError(rw, status, msg)
	}
	if gw != nil {
		info.GRPCStatus = gw.Finish()
		if gw.Own() {
			rw.Bytes = 0 // the JSON body was not sent
		}
	}
	if target, ok := repl.GetString("http.reverse_proxy.upstream.hostport"); ok && target != "" {
		info.Target = target
	}
	h.cp.observer.Observe(gwctx.NewRecord(r, info, rw.Status, rw.Bytes, time.Now()), info)
}

// requestState is what the proxy handler allocates per request.
type requestState struct {
	info gwctx.Info
	rw   gwctx.RecordingWriter
}

// Interface guards
var _ http.Handler = (*proxyHandler)(nil)
