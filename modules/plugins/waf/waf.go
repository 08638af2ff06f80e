// Package waf is the waf plugin type (an extension of the contract's plugin
// types): a web application firewall on the OWASP Coraza engine with the
// OWASP Core Rule Set v4 embedded in the binary (docs/waf.md).
//
// The rule set is compiled once per distinct configuration (engine.go) and
// shared by every config that uses it, across reloads; a request costs one
// pooled Coraza transaction.
package waf

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/corazawaf/coraza/v3/experimental/plugins/plugintypes"
	"github.com/corazawaf/coraza/v3/types"

	"github.com/caddy-gateway/gateway/internal/gwctx"
	"github.com/caddy-gateway/gateway/internal/records"
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/schema"
)

func init() {
	plugins.Register(plugins.Type{Name: "waf", Ordering: 250, Extension: true,
		Doc: "Web application firewall: the OWASP Core Rule Set v4 (embedded in the gateway) on the Coraza engine inspects each request's line, headers and body (up to request_body_limit) and, with inspect_response, the response. " +
			"A request whose anomaly score reaches the threshold is answered 403 {error} (no rule text) and never reaches the upstream; detect mode only records. " +
			"The request record's waf field (GET /api/v1/requests, the event stream, http-log) carries the action, the anomaly score and the matched rules' ids and messages, and /metrics counts them per route and rule (gateway_waf_rule_matches_total). " +
			"directives may not read or write files or reach the network (Include, SecAuditLog*, @pmFromFile … are 400). " +
			"The rule set is compiled once per distinct config and shared across reloads (docs/waf.md).",
		New: func() plugins.Plugin { return new(WAF) }})
}

// WAF is the waf plugin.
//
// Caddyfile: the generic syntax of plugins.UnmarshalCaddyfile:
//
//	gateway_waf {
//	    mode detect
//	    paranoia_level 2
//	    exclude_rule_ids 942100 920350
//	}
type WAF struct {
	Mode                     string   `json:"mode" schema:"enum=block|detect" doc:"block: a request whose inbound anomaly score reaches inbound_anomaly_threshold is answered 403 (and a response whose outbound score reaches outbound_anomaly_threshold, with inspect_response); detect: every rule runs and matches are recorded, nothing is blocked. Default block."`
	ParanoiaLevel            int      `json:"paranoia_level" schema:"min=1,max=4" doc:"CRS paranoia level: 1 (few false positives) to 4 (most rules). Default 1."`
	InboundAnomalyThreshold  int      `json:"inbound_anomaly_threshold" schema:"min=1,max=10000" doc:"Inbound anomaly score at which a request is blocked (a critical rule scores 5, error 4, warning 3, notice 2). Default 5."`
	OutboundAnomalyThreshold int      `json:"outbound_anomaly_threshold" schema:"min=1,max=10000" doc:"Outbound anomaly score at which a response is blocked (inspect_response). Default 4."`
	AllowedMethods           []string `json:"allowed_methods" schema:"minItems=1,maxItems=32,minLength=1,maxLength=32" doc:"Request methods the CRS admits (rule 911100, tx.allowed_methods). Default GET HEAD POST OPTIONS PUT PATCH DELETE: the CRS's own default leaves out PUT, PATCH and DELETE, which an API gateway serves."`
	ExcludeRuleIDs           []int    `json:"exclude_rule_ids" schema:"maxItems=1000" doc:"Rule ids switched off for this plugin's scope (SecRuleRemoveById), e.g. a false positive; each 1..999999999."`
	RequestBodyLimit         int64    `json:"request_body_limit" schema:"min=1,max=67108864" doc:"Request body bytes inspected (held in memory while inspected). Default 131072 (128 KiB); at most 64 MiB. The same limit applies to an inspected response body."`
	BodyLimitAction          string   `json:"body_limit_action" schema:"enum=reject|partial" doc:"A request body over request_body_limit: reject answers 413 (block mode) before the upstream is contacted; partial inspects the first request_body_limit bytes and forwards the whole body. Default reject."`
	InspectResponse          bool     `json:"inspect_response" doc:"Also run the response rules (data leakages) on the upstream's response headers and its text, HTML, XML or JSON body up to request_body_limit; a blocked response is replaced by 403. Default false."`
	Directives               string   `json:"directives" schema:"text,maxLength=65536" doc:"Extra SecLang directives run after the CRS (your own rules, SecRuleUpdateTargetById and other tuning). Allowed: SecRule, SecAction, SecMarker, SecDefaultAction, SecRuleRemoveBy*, SecRuleUpdateTargetBy*, SecRuleUpdateActionById, SecComponentSignature, SecArgumentSeparator, SecWebAppId; anything that reads or writes files or reaches the network (Include, SecAuditLog*, SecDebugLog*, SecRemoteRules, @pmFromFile, @ipMatchFromFile, @inspectFile, @rbl, @geoLookup …) and settings owned by this config (SecRuleEngine, body limits) are 400 naming the directive; a directive Coraza cannot parse is 400 with its message."`
	engine                   *engine  `json:"-"`
	key                      string
}

// SetDefaults implements schema.Defaulter.
func (h *WAF) SetDefaults() {
	h.Mode = "block"
	h.ParanoiaLevel = 1
	h.InboundAnomalyThreshold = 5
	h.OutboundAnomalyThreshold = 4
	h.AllowedMethods = []string{"GET", "HEAD", "POST", "OPTIONS", "PUT", "PATCH", "DELETE"}
	h.ExcludeRuleIDs = []int{}
	h.RequestBodyLimit = 128 << 10
	h.BodyLimitAction = "reject"
}

// CaddyModule returns the Caddy module information.
func (*WAF) CaddyModule() caddy.ModuleInfo { return plugins.ModuleInfo[WAF]("waf") }

// Provision checks the config and takes the compiled rule set of this
// config from the process-wide pool (compiling it at its first use).
func (h *WAF) Provision(caddy.Context) error {
	if err := schema.Check(h); err != nil {
		return err
	}
	e, key, err := acquire(h)
	if err != nil {
		return err
	}
	h.engine, h.key = e, key
	return nil
}

// Validate checks what the tags cannot say: rule ids and the directives'
// allow-list (their parsing needs the compiler: ValidateInput).
func (h *WAF) Validate() error {
	for i, id := range h.ExcludeRuleIDs {
		if id < 1 || id > 999999999 {
			return schema.Errorf("exclude_rule_ids["+strconv.Itoa(i)+"]", "must be a rule id 1..999999999")
		}
	}
	for i, m := range h.AllowedMethods {
		for _, c := range m {
			if c > 0x7e || c <= ' ' || strings.ContainsRune("\"'(),/:;<=>?@[\\]{}", c) {
				return schema.Errorf("allowed_methods["+strconv.Itoa(i)+"]", "must be a method name (an HTTP token)")
			}
		}
	}
	return checkDirectives(h.Directives)
}

// ValidateInput compiles the rule set of a new config (the admin API's
// writes), so that a directive Coraza cannot parse is a 400 with its
// message; the compiled rule set is kept for the load that follows.
func (h *WAF) ValidateInput() error {
	if err := validateCompile(h); err != nil {
		return schema.Errorf("directives", "%v", err)
	}
	return nil
}

// Cleanup releases this config's use of the compiled rule set.
func (h *WAF) Cleanup() error {
	if h.engine != nil {
		release(h.key)
		h.engine = nil
	}
	return nil
}

const (
	blockedMsg  = "request blocked by the web application firewall"
	tooLargeMsg = "request body too large for the web application firewall"
)

var chunkPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// ServeHTTP runs the request phases before the upstream is contacted and,
// with inspect_response, the response phases before the client gets the
// response.
func (h *WAF) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	info := gwctx.From(r)
	var tx types.Transaction
	if info != nil && info.RequestID != "" {
		tx = h.engine.waf.NewTransactionWithID(info.RequestID)
	} else {
		tx = h.engine.waf.NewTransaction()
	}
	blocked := false
	defer func() {
		tx.ProcessLogging()
		if info != nil {
			info.WAF = verdict(tx, blocked)
		}
		_ = tx.Close()
	}()

	cip := gwctx.ClientIP(r)
	sip, sport := localAddr(r)
	cport := 0
	if _, p, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		cport, _ = strconv.Atoi(p)
	}
	tx.ProcessConnection(cip, cport, sip, sport)
	uri := r.RequestURI
	if uri == "" {
		uri = r.URL.RequestURI()
	}
	tx.ProcessURI(uri, r.Method, r.Proto)
	for k, vs := range r.Header {
		for _, v := range vs {
			tx.AddRequestHeader(k, v)
		}
	}
	if r.Host != "" {
		tx.AddRequestHeader("Host", r.Host)
		if host, _, err := net.SplitHostPort(r.Host); err == nil {
			tx.SetServerName(host)
		} else {
			tx.SetServerName(r.Host)
		}
	}
	for _, te := range r.TransferEncoding {
		tx.AddRequestHeader("Transfer-Encoding", te)
	}
	if it := tx.ProcessRequestHeaders(); it != nil {
		blocked = true
		return h.deny(w, r, http.StatusForbidden, blockedMsg)
	}

	if r.Body != nil && r.Body != http.NoBody && tx.IsRequestBodyAccessible() {
		if h.BodyLimitAction == "reject" && h.Mode == "block" && r.ContentLength > h.RequestBodyLimit {
			blocked = true
			return h.deny(w, r, http.StatusRequestEntityTooLarge, tooLargeMsg)
		}
		leftover, it, err := h.readBody(tx, r.Body)
		if err != nil {
			return caddyhttp.Error(http.StatusBadRequest, fmt.Errorf("reading the request body: %w", err))
		}
		if it != nil {
			blocked = true
			return h.deny(w, r, http.StatusForbidden, blockedMsg)
		}
		if len(leftover) > 0 && h.BodyLimitAction == "reject" && h.Mode == "block" {
			blocked = true
			return h.deny(w, r, http.StatusRequestEntityTooLarge, tooLargeMsg)
		}
		inspected, err := tx.RequestBodyReader()
		if err != nil {
			return fmt.Errorf("waf: the inspected request body: %w", err)
		}
		r.Body = bodyReader{io.MultiReader(inspected, bytes.NewReader(leftover), r.Body), r.Body}
	}
	it, err := tx.ProcessRequestBody()
	if err != nil {
		return fmt.Errorf("waf: request body phase: %w", err)
	}
	if it != nil {
		blocked = true
		return h.deny(w, r, http.StatusForbidden, blockedMsg)
	}

	if !h.InspectResponse || isUpgrade(r) {
		return next.ServeHTTP(w, r)
	}
	rw := &responseInspector{ResponseWriterWrapper: &caddyhttp.ResponseWriterWrapper{ResponseWriter: w}, tx: tx, limit: h.RequestBodyLimit, proto: r.Proto}
	err = next.ServeHTTP(rw, r)
	if rw.finish() {
		blocked = true
		if !rw.sent {
			gwctx.WriteError(w, http.StatusForbidden, blockedMsg)
		}
		return nil
	}
	return err
}

// readBody hands the request body to the transaction until it holds
// RequestBodyLimit bytes; what it read beyond (leftover) is forwarded
// after the inspected part.
func (h *WAF) readBody(tx types.Transaction, body io.Reader) (leftover []byte, it *types.Interruption, err error) {
	bp := chunkPool.Get().(*[]byte)
	defer chunkPool.Put(bp)
	buf := *bp
	var held int64
	for {
		want := len(buf)
		// one byte past the limit tells a body over it from one that ends there
		if rest := h.RequestBodyLimit + 1 - held; rest < int64(want) {
			want = int(rest)
		}
		n, rerr := body.Read(buf[:want])
		if n > 0 {
			take := n
			if room := h.RequestBodyLimit - held; int64(take) > room {
				take = int(room)
			}
			if take > 0 {
				var w int
				it, w, err = tx.WriteRequestBody(buf[:take])
				if err != nil {
					return nil, nil, err
				}
				if it != nil {
					return nil, it, nil
				}
				held += int64(w)
				if w < take {
					take = w
				}
			}
			if take < n {
				return bytes.Clone(buf[take:n]), nil, nil
			}
		}
		if rerr == io.EOF {
			return nil, nil, nil
		}
		if rerr != nil {
			return nil, nil, rerr
		}
	}
}

// deny answers the request itself (the upstream is never contacted).
func (h *WAF) deny(w http.ResponseWriter, r *http.Request, status int, msg string) error {
	if h.Mode == "detect" {
		// Coraza in DetectionOnly never interrupts; kept for safety.
		return nil
	}
	r.Close = true
	gwctx.WriteError(w, status, msg)
	return nil
}

// verdict is the record's waf field: nil when nothing matched.
func verdict(tx types.Transaction, blocked bool) *records.WAF {
	var rules []records.WAFRule
	for _, mr := range tx.MatchedRules() {
		if l, ok := mr.(interface{ Log() bool }); ok && !l.Log() {
			continue
		}
		id := mr.Rule().ID()
		if id == 0 || len(rules) == maxRecordRules {
			continue
		}
		rules = append(rules, records.WAFRule{ID: id, Message: bounded(mr.Message(), maxRecordMessage)})
	}
	if len(rules) == 0 && !blocked {
		return nil
	}
	v := &records.WAF{Action: "detected", Rules: rules}
	if blocked || tx.IsInterrupted() {
		v.Action = "blocked"
	}
	if v.Rules == nil {
		v.Rules = []records.WAFRule{}
	}
	if st, ok := tx.(plugintypes.TransactionState); ok {
		txv := st.Variables().TX()
		v.AnomalyScore = txInt(txv, "blocking_inbound_anomaly_score")
		v.OutboundAnomalyScore = txInt(txv, "blocking_outbound_anomaly_score")
	}
	return v
}

const (
	maxRecordRules   = 64
	maxRecordMessage = 256
)

func txInt(m interface{ Get(string) []string }, key string) int {
	vs := m.Get(key)
	if len(vs) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(vs[0])
	return n
}

func bounded(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

func localAddr(r *http.Request) (string, int) {
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if host, p, err := net.SplitHostPort(a.String()); err == nil {
			port, _ := strconv.Atoi(p)
			return host, port
		}
	}
	return "", 0
}

func isUpgrade(r *http.Request) bool {
	return r.Header.Get("Upgrade") != "" || r.Method == http.MethodConnect
}

type bodyReader struct {
	io.Reader
	io.Closer
}

// responseInspector holds the response back until the response phases
// have run on its header and (a processable body) its first limit bytes.
type responseInspector struct {
	*caddyhttp.ResponseWriterWrapper
	tx    types.Transaction
	limit int64
	proto string

	status    int
	inspectB  bool // the body is held for phase 4
	buf       bytes.Buffer
	decided   bool // the phases ran; what follows passes through
	sent      bool // the header went to the client
	interrupt bool
}

func (w *responseInspector) WriteHeader(code int) {
	if w.status != 0 || w.decided {
		if code < 200 || w.decided {
			w.ResponseWriterWrapper.WriteHeader(code)
		}
		return
	}
	if code < 200 {
		w.ResponseWriterWrapper.WriteHeader(code)
		return
	}
	w.status = code
	for k, vs := range w.Header() {
		for _, v := range vs {
			w.tx.AddResponseHeader(k, v)
		}
	}
	if it := w.tx.ProcessResponseHeaders(code, w.proto); it != nil {
		w.interrupt = true
		w.decided = true
		return
	}
	w.inspectB = w.tx.IsResponseBodyAccessible() && w.tx.IsResponseBodyProcessable() && !gwctx.IsEventStream(w.Header())
	if !w.inspectB {
		w.decide()
	}
}

func (w *responseInspector) Write(p []byte) (int, error) {
	if w.status == 0 && !w.decided {
		w.WriteHeader(http.StatusOK)
	}
	if w.interrupt {
		return len(p), nil
	}
	if w.decided {
		return w.ResponseWriterWrapper.Write(p)
	}
	n, _ := w.buf.Write(p)
	if int64(w.buf.Len()) > w.limit {
		w.decide()
	}
	return n, nil
}

// ReadFrom keeps the proxy's copy going through Write (the body must be
// seen).
func (w *responseInspector) ReadFrom(r io.Reader) (int64, error) {
	return io.Copy(writerOnly{w}, r)
}

type writerOnly struct{ io.Writer }

// FlushError runs the phases on what is held (a streamed response cannot
// be held whole) and passes the flush on.
func (w *responseInspector) FlushError() error {
	if !w.decided {
		if w.status == 0 || w.buf.Len() == 0 {
			// a flush of the header alone (the proxy's, before the body):
			// the body is still to be seen
			return nil
		}
		w.decide()
	}
	if w.interrupt {
		return nil
	}
	return http.NewResponseController(w.ResponseWriterWrapper).Flush()
}

// decide runs the body phase on what is held, then sends the header and
// the held body unless the transaction was interrupted.
func (w *responseInspector) decide() {
	if w.decided {
		return
	}
	w.decided = true
	if w.inspectB {
		b := w.buf.Bytes()
		if int64(len(b)) > w.limit {
			b = b[:w.limit]
		}
		if it, _, err := w.tx.WriteResponseBody(b); it != nil || err != nil {
			w.interrupt = it != nil
		}
		if !w.interrupt {
			if it, err := w.tx.ProcessResponseBody(); it != nil && err == nil {
				w.interrupt = true
			}
		}
	}
	if w.interrupt {
		return
	}
	w.sent = true
	w.ResponseWriterWrapper.WriteHeader(w.status)
	if w.buf.Len() > 0 {
		_, _ = w.ResponseWriterWrapper.Write(w.buf.Bytes())
	}
	w.buf = bytes.Buffer{}
}

// finish runs what is still pending once the handler returned and reports
// whether the response was blocked.
func (w *responseInspector) finish() bool {
	if w.status == 0 && !w.decided {
		// nothing written: the handler's error (if any) answers
		w.decided = true
		return false
	}
	w.decide()
	return w.interrupt
}

// Interface guards
var (
	_ plugins.Plugin         = (*WAF)(nil)
	_ plugins.InputValidator = (*WAF)(nil)
	_ caddy.CleanerUpper     = (*WAF)(nil)
	_ io.ReaderFrom          = (*responseInspector)(nil)
)
