package gwproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/net/http/httpguts"

	"github.com/caddy-gateway/gateway/internal/gwctx"
)

// UpstreamHostportKey is the replacer key set to the chosen target's dial
// address before each attempt (reverse_proxy's name for it, so the request
// record and Host rules read it whichever handler proxied).
const UpstreamHostportKey = "http.reverse_proxy.upstream.hostport"

var errNoUpstream = errors.New("no upstreams available")

// maxCaddyHops is how many Caddy proxies (Via entries "1.1 Caddy", which
// the gateway adds as Caddy's reverse_proxy does) a request may have
// passed through before the gateway refuses to forward it again (508). A
// loop the gateway cannot see from its own addresses (package guard), a
// target that is a load balancer in front of the gateway or another node
// whose route sends the request back, otherwise went round until the
// forwarded headers outgrew the header limit: some 1,300 rounds and 2,600
// connections held for over two seconds, per client request. Real chains
// of proxies are a handful long.
const maxCaddyHops = 16

var errLoop = fmt.Errorf("loop detected: the request has passed through %d Caddy proxies (Via), a route's target leads back to the gateway", maxCaddyHops)

// ServeHTTP proxies r to a target, trying others after a failed attempt
// as LoadBalancing allows. next is never called.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	repl, _ := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if repl == nil {
		return caddyhttp.Error(http.StatusInternalServerError, errors.New("gateway_proxy: the request has no replacer"))
	}
	if vias := r.Header["Via"]; len(vias) > 0 && caddyHops(vias) >= maxCaddyHops {
		// Written here: the proxy's error page says only the status text
		// of a 5xx, and this one names no address.
		gwctx.WriteError(w, http.StatusLoopDetected, errLoop.Error())
		return nil
	}
	grpc := h.GRPC != nil && IsGRPCRequest(r)
	if grpc {
		var cancel context.CancelFunc
		if r, cancel = h.GRPC.deadline(r); cancel != nil {
			defer cancel()
		}
	}
	retries := 0
	if h.LoadBalancing != nil {
		retries = h.LoadBalancing.Retries
	}
	var body *clientBody
	if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
		body = &clientBody{r: r.Body}
	}
	var err error
	for attempt := 0; ; attempt++ {
		up, hst := h.pick(r, w)
		if up == nil {
			if err == nil {
				return caddyhttp.Error(http.StatusServiceUnavailable, errNoUpstream)
			}
			return statusError(err) // the last attempt's failure
		}
		var done bool
		done, err = h.attempt(w, r, repl, up, hst, body, grpc)
		if done {
			return err
		}
		if attempt >= retries || !retryable(err, r, body) {
			return statusError(err)
		}
	}
}

// pick chooses the target of the next attempt: the selection policy over
// the targets passive health has not taken out of rotation.
func (h *Handler) pick(r *http.Request, w http.ResponseWriter) (*reverseproxy.Upstream, *host) {
	pool := reverseproxy.UpstreamPool(h.Upstreams)
	if h.passive != nil {
		for i := range h.Upstreams {
			if h.passive.down(h.hosts[i]) {
				pool = h.available()
				break
			}
		}
	}
	up := h.selector.Select(pool, r, w)
	if up == nil {
		return nil, nil
	}
	for i, u := range h.Upstreams {
		if u == up {
			return up, h.hosts[i]
		}
	}
	return nil, nil
}

// available are the targets passive health keeps in rotation.
func (h *Handler) available() reverseproxy.UpstreamPool {
	pool := make(reverseproxy.UpstreamPool, 0, len(h.Upstreams))
	for i, u := range h.Upstreams {
		if !h.passive.down(h.hosts[i]) {
			pool = append(pool, u)
		}
	}
	return pool
}

// attempt sends one attempt to up. done is false when the round trip
// failed before any response (err is the failure): another target may be
// tried.
func (h *Handler) attempt(w http.ResponseWriter, r *http.Request, repl *caddy.Replacer, up *reverseproxy.Upstream, hst *host, body *clientBody, grpc bool) (done bool, err error) {
	repl.Set(UpstreamHostportKey, up.Dial)
	o := outbound(r, up.Dial, body, w)
	out := &o.req
	switch {
	case h.hostOnly:
		out.Host = repl.ReplaceKnown(h.hostValue, "")
	case h.Headers != nil && h.Headers.Request != nil:
		h.Headers.Request.ApplyToRequest(out)
	}
	if _, ok := h.transport.(schemeSetter); !ok {
		out.URL.Scheme = "http"
	}
	var traced func(int, error)
	if info := gwctx.From(r); info != nil && info.Tracer != nil {
		traced = info.Tracer.StartAttempt(out, up.Dial)
	}
	res, err := h.transport.RoundTrip(out)
	o.info.finish()
	if traced != nil {
		if err != nil {
			traced(0, err)
		} else {
			defer traced(res.StatusCode, nil)
		}
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			// the client left: not the target's failure, nobody to answer
			w.WriteHeader(499)
			return true, nil
		}
		if berr := body.failure(); berr != nil {
			// The client's body broke (short, reset): the client's
			// fault, not the target's, and not worth another target.
			status := http.StatusBadRequest
			if r.Context().Err() != nil {
				status = 499
			}
			return true, caddyhttp.Error(status, fmt.Errorf("reading the request body: %w", berr))
		}
		if r.Context().Err() != nil {
			// The call's own deadline (gRPC) passed: the target was
			// not too slow to answer within a timeout of its service.
			return true, caddyhttp.Error(http.StatusGatewayTimeout, err)
		}
		if grpc && streamReset(err) {
			// The target reset this one call (a gRPC server does when
			// the call's deadline passes): it is up and answering.
			if _, ok := r.Context().Deadline(); ok && strings.Contains(err.Error(), "CANCEL") {
				// its timer fired before the proxy's
				return true, caddyhttp.Error(http.StatusGatewayTimeout, err)
			}
			return true, statusError(err)
		}
		h.passive.fail(hst)
		return false, err
	}
	return true, h.respond(w, out, res, grpc)
}

// schemeSetter is a transport that sets the URL scheme itself (Caddy's
// http transport: https when it has TLS).
type schemeSetter interface{ SetScheme(*http.Request) }

// retryable reports whether a failed attempt may be repeated on another
// target: always when no connection was made (nothing was sent), else
// only for a GET whose body (if any) was not read from: a partly sent
// body cannot be sent again.
func retryable(err error, r *http.Request, body *clientBody) bool {
	var dialErr reverseproxy.DialError
	if errors.As(err, &dialErr) {
		return true
	}
	return r.Method == http.MethodGet && body.consumed() == 0
}

// statusError is the handler error of a failed proxy attempt: 504 for a
// timeout, 499 when the client left, else 502.
func statusError(err error) error {
	if _, ok := err.(caddyhttp.HandlerError); ok {
		return err
	}
	status := http.StatusBadGateway
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		status = http.StatusGatewayTimeout
	}
	if errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "operation was canceled") {
		status = 499
	}
	return caddyhttp.Error(status, err)
}

// clientBody is the client's request body as the transport reads it: it
// records what was read and the client side's read error, so that a
// failed round trip can tell a broken client body (not the target's
// failure) and a body already partly sent (not repeatable) apart. Close
// does nothing: the transport closes a body it fails to send, a retry
// still needs it, and the server closes it. The transport may read it on
// its own goroutine, hence the lock.
type clientBody struct {
	r    io.Reader
	mu   sync.Mutex
	read int64
	err  error
}

func (b *clientBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.mu.Lock()
	b.read += int64(n)
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	b.mu.Unlock()
	return n, err
}

func (b *clientBody) Close() error { return nil }

// consumed is how many bytes were read (0 for no body).
func (b *clientBody) consumed() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.read
}

// failure is the client side's read error, if any (nil for no body).
func (b *clientBody) failure() error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// outRequest is the upstream request, its URL and the trace that
// forwards the target's informational responses: one allocation.
type outRequest struct {
	req   http.Request
	url   url.URL
	trace httptrace.ClientTrace
	info  informational
}

// Header values the proxy sets without formatting them.
var (
	connUpgrade = []string{"Upgrade"}
	teTrailers  = []string{"trailers"}
	emptyValue  = []string{""}
	earlyData   = []string{"1"}
	protoHTTP   = []string{"http"}
	protoHTTPS  = []string{"https"}
	viaHTTP11   = []string{"1.1 Caddy"}
	viaHTTP2    = []string{"2.0 Caddy"}
)

// outbound is the request to send to the target at dial: r's method,
// URL, body and end-to-end headers, with the X-Forwarded-* headers and
// Via, and a trace forwarding informational responses to w. Header value
// slices are shared with r's (never appended to).
func outbound(r *http.Request, dial string, body *clientBody, w http.ResponseWriter) *outRequest {
	o := new(outRequest)
	out := &o.req
	if body != nil && httpguts.HeaderValuesContainsToken(r.Header["Expect"], "100-continue") {
		// No informational responses to a client waiting for 100
		// Continue: net/http's server writes that one from whichever
		// goroutine first reads the body (the transport's), unordered
		// with a 1xx written from the goroutine reading the response.
		*out = *r
	} else {
		o.info.w = w
		o.trace.Got1xxResponse = o.info.got1xx
		*out = *r.WithContext(httptrace.WithClientTrace(r.Context(), &o.trace))
	}
	o.url = *r.URL
	// An absolute-form request line (GET https://x/ HTTP/1.1) fills the
	// client's URL Scheme, Host and User: none of them is the client's to
	// choose. The transport sets the scheme (https when it has TLS),
	// Host is the target.
	o.url.Scheme = ""
	o.url.User = nil
	o.url.Host = dial
	out.URL = &o.url
	out.RequestURI = ""
	out.Close = false
	if body == nil {
		out.Body = nil // net/http's transport retries only requests without a body
	} else {
		// The transport closes a body it fails to send; a retry to
		// another target still needs it (the server closes it).
		out.Body = body
	}

	hdr := make(http.Header, len(r.Header)+5)
	conn := r.Header["Connection"]
	for k, v := range r.Header {
		if isHopHeader(k) || (len(conn) > 0 && listedIn(conn, k)) {
			continue
		}
		hdr[k] = v
	}
	if httpguts.HeaderValuesContainsToken(r.Header["Te"], "trailers") {
		hdr["Te"] = teTrailers
	}
	// h2c is not tunnelled: behind the gateway it would open an HTTP/2
	// connection to the target that the router's rules never see
	// (request smuggling); the request goes as a plain one.
	if up := upgradeType(r.Header); up != "" && !httpguts.HeaderValuesContainsToken(r.Header["Upgrade"], "h2c") {
		hdr["Connection"] = connUpgrade
		hdr["Upgrade"] = []string{up}
	}
	if _, ok := hdr["User-Agent"]; !ok {
		hdr["User-Agent"] = emptyValue // not Go's default
	}
	if r.TLS != nil && !r.TLS.HandshakeComplete {
		hdr["Early-Data"] = earlyData
	}
	forwarded(r, hdr)
	switch {
	case len(hdr["Via"]) > 0:
		hdr["Via"] = append(hdr["Via"][:len(hdr["Via"]):len(hdr["Via"])], via(r.ProtoMajor, r.ProtoMinor))
	case r.ProtoMajor == 1 && r.ProtoMinor == 1:
		hdr["Via"] = viaHTTP11
	case r.ProtoMajor == 2:
		hdr["Via"] = viaHTTP2
	default:
		hdr["Via"] = []string{via(r.ProtoMajor, r.ProtoMinor)}
	}
	out.Header = hdr
	return o
}

// caddyHops counts the Via entries a Caddy proxy added ("1.1 Caddy",
// "2.0 Caddy (comment)"), up to maxCaddyHops.
func caddyHops(vias []string) int {
	n := 0
	for _, v := range vias {
		for entry := range strings.SplitSeq(v, ",") {
			if f := strings.Fields(entry); len(f) >= 2 && f[1] == "Caddy" {
				if n++; n >= maxCaddyHops {
					return n
				}
			}
		}
	}
	return n
}

func via(major, minor int) string {
	return string(rune('0'+major%10)) + "." + string(rune('0'+minor%10)) + " Caddy"
}

// forwarded sets X-Forwarded-For, -Proto and -Host: the values a trusted
// peer (the router's trusted_proxies) sent are kept (For gets the peer
// appended), anyone else's are replaced. A header present with a nil
// value is left out.
func forwarded(r *http.Request, hdr http.Header) {
	trusted, _ := caddyhttp.GetVar(r.Context(), caddyhttp.TrustedProxyVarKey).(bool)
	peer, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		if !trusted || r.RemoteAddr != "@" {
			delete(hdr, "X-Forwarded-For")
			delete(hdr, "X-Forwarded-Proto")
			delete(hdr, "X-Forwarded-Host")
			return
		}
		peer = "" // a trusted unix socket peer has no address to add
	}
	peer, _, _ = strings.Cut(peer, "%")

	vals := make([]string, 0, 2) // For and Host share one array
	if v, ok := hdr["X-Forwarded-For"]; !ok || v != nil {
		prior := strings.Join(v, ", ")
		switch {
		case trusted && prior != "" && peer != "":
			vals = append(vals, prior+", "+peer)
		case trusted && prior != "":
			vals = append(vals, prior)
		case peer != "":
			vals = append(vals, peer)
		}
		if len(vals) == 1 {
			hdr["X-Forwarded-For"] = vals[0:1:1]
		}
	}
	if v, ok := hdr["X-Forwarded-Proto"]; !ok || v != nil {
		switch {
		case trusted && len(v) > 0 && v[len(v)-1] != "":
			hdr["X-Forwarded-Proto"] = v[len(v)-1:]
		case r.TLS != nil:
			hdr["X-Forwarded-Proto"] = protoHTTPS
		default:
			hdr["X-Forwarded-Proto"] = protoHTTP
		}
	}
	if v, ok := hdr["X-Forwarded-Host"]; !ok || v != nil {
		if trusted && len(v) > 0 && v[len(v)-1] != "" {
			hdr["X-Forwarded-Host"] = v[len(v)-1:]
		} else {
			vals = append(vals, r.Host)
			hdr["X-Forwarded-Host"] = vals[len(vals)-1 : len(vals) : len(vals)]
		}
	}
}

// isHopHeader reports the hop-by-hop headers that never go to the other
// side (canonical names).
func isHopHeader(k string) bool {
	switch k {
	case "Alt-Svc", "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

// listedIn reports whether the Connection header values conn name k.
func listedIn(conn []string, k string) bool {
	for _, v := range conn {
		for f := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), k) {
				return true
			}
		}
	}
	return false
}

// upgradeType is the protocol a request or response upgrades to, in
// lower case, or "".
func upgradeType(h http.Header) string {
	if !httpguts.HeaderValuesContainsToken(h["Connection"], "Upgrade") {
		return ""
	}
	if v := h["Upgrade"]; len(v) > 0 {
		return strings.ToLower(v[0])
	}
	return ""
}

// stripHopHeaders removes the hop-by-hop headers of a response.
func stripHopHeaders(h http.Header) {
	for _, v := range h["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				h.Del(f)
			}
		}
	}
	for k := range h {
		if isHopHeader(k) {
			delete(h, k)
		}
	}
}

// respond writes the target's response: status, end-to-end headers, the
// body (flushed as it comes for event streams and bodies of unknown
// length) and trailers. A 101 becomes a tunnel.
func (h *Handler) respond(w http.ResponseWriter, out *http.Request, res *http.Response, grpc bool) error {
	upgrade := res.Header.Get("Upgrade")
	stripHopHeaders(res.Header)
	if res.StatusCode == http.StatusSwitchingProtocols {
		if upgrade != "" {
			res.Header["Upgrade"] = []string{upgrade}
			res.Header["Connection"] = connUpgrade
		}
		return h.tunnel(w, out, res)
	}
	wh := w.Header()
	delete(wh, "Server")
	for k, v := range res.Header {
		if prior, ok := wh[k]; ok {
			wh[k] = append(prior[:len(prior):len(prior)], v...)
		} else {
			wh[k] = v // the response's map is ours alone
		}
	}
	// ours after the target's own (RFC 9110: in the order forwarded)
	if v := wh["Via"]; len(v) > 0 {
		wh["Via"] = append(v[:len(v):len(v)], via(res.ProtoMajor, res.ProtoMinor))
	} else if res.ProtoMajor == 1 && res.ProtoMinor == 1 {
		wh["Via"] = viaHTTP11
	} else {
		wh["Via"] = []string{via(res.ProtoMajor, res.ProtoMinor)}
	}
	announced := len(res.Trailer)
	if announced > 0 {
		keys := make([]string, 0, announced)
		for k := range res.Trailer {
			keys = append(keys, k)
		}
		wh.Add("Trailer", strings.Join(keys, ", "))
	}
	if info := gwctx.From(out); info != nil {
		info.Upstream = true
	}
	w.WriteHeader(res.StatusCode)

	err := copyBody(w, res.Body, grpc || streaming(res))
	_ = res.Body.Close() // fills res.Trailer
	if err != nil && grpc && res.StatusCode == http.StatusOK {
		// A gRPC client reads a status from the trailers: the call
		// ends with one, as a server would end it.
		code, msg := 14, "the target's response broke off" // UNAVAILABLE
		if errors.Is(out.Context().Err(), context.DeadlineExceeded) {
			code, msg = 4, "deadline exceeded" // DEADLINE_EXCEEDED
		} else if out.Context().Err() != nil {
			code, msg = 1, "cancelled" // CANCELLED
		}
		_ = http.NewResponseController(w).Flush()
		grpcStatusTrailer(w, code, msg)
		return nil
	}
	if err != nil {
		// Headers are out: nothing to answer. Abort the client's
		// response so it cannot pass for complete.
		if c := h.logger.Check(zapcore.WarnLevel, "aborting with incomplete response"); c != nil {
			c.Write(zap.String("upstream", out.URL.Host), zap.Error(err))
		}
		_ = http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	}
	if len(res.Trailer) > 0 {
		// chunked, so that the trailers can follow
		_ = http.NewResponseController(w).Flush()
	}
	if len(res.Trailer) == announced {
		for k, v := range res.Trailer {
			wh[k] = append(wh[k], v...)
		}
		return nil
	}
	for k, vv := range res.Trailer {
		for _, v := range vv {
			wh.Add(http.TrailerPrefix+k, v)
		}
	}
	return nil
}

// streaming reports whether the response is copied with a flush after
// every read: event streams, bodies of unknown length, and responses the
// target marked incremental.
func streaming(res *http.Response) bool {
	if res.ContentLength < 0 || caddyhttp.IsIncremental(res.Header) {
		return true
	}
	return gwctx.IsEventStream(res.Header)
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 32*1024); return &b }}

// copyBody copies the response body to w (its Write, not ReadFrom: one
// write with the headers for small bodies), flushing after every write
// when flush is set.
func copyBody(w http.ResponseWriter, body io.Reader, flush bool) error {
	var rc *http.ResponseController
	if flush {
		rc = http.NewResponseController(w)
		_ = rc.Flush() // the headers go out before the first event
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			if rc != nil {
				if ferr := rc.Flush(); ferr != nil {
					return ferr
				}
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}
