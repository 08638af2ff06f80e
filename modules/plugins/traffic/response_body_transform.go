package traffic

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/klauspost/compress/zstd"

	"github.com/caddy-gateway/gateway/internal/gwctx"
	"github.com/caddy-gateway/gateway/internal/regexsize"
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/schema"
)

// ResponseBodyTransform is the response-body-transform plugin. It buffers
// eligible responses (media type in content_types, body at most
// max_body_bytes, not HEAD, not 1xx/204/206/304, identity, gzip or zstd
// encoded, not an event stream), applies the replace rules to the body
// text, then for JSON bodies (application/json or +json) json_remove and
// json_set, and sends the result with a corrected Content-Length
// (re-encoded as it came; the ETag, which no longer matches, is dropped). Other responses, and any that
// turn out larger than max_body_bytes while being read, stream through
// unchanged, as does a body the replacements would make larger than
// maxTransformedBytes.
//
// Caddyfile: the generic syntax of plugins.UnmarshalCaddyfile (replace
// takes the pattern and the replacement; json_set a path and a JSON value,
// or a plain string):
//
//	gateway_response_body_transform {
//	    replace "http://internal\.example" "https://api.example.com"
//	    json_remove user.password internal
//	    json_set meta.gateway true
//	    json_set meta.region eu-west
//	    content_types application/json
//	    max_body_bytes 262144
//	}
type ResponseBodyTransform struct {
	Replace      []BodyReplacement          `json:"replace" schema:"maxItems=100" doc:"Regular expression replacements on the body text, in order."`
	JSONRemove   []string                   `json:"json_remove" schema:"maxItems=100,maxLength=1024" doc:"Dotted paths removed from JSON bodies (a.b.c; numeric segments index arrays: items.0.secret)."`
	JSONSet      map[string]json.RawMessage `json:"json_set" schema:"keys=path,maxItems=100" doc:"Dotted path → JSON value set in JSON bodies (missing objects on the way are created)."`
	ContentTypes []string                   `json:"content_types" schema:"maxItems=100,maxLength=255" doc:"Media types transformed (type/subtype or type/*). Default application/json, text/html, text/plain. An event stream (text/event-stream) passes through as it comes, even when listed."`
	MaxBodyBytes int64                      `json:"max_body_bytes" schema:"min=1,max=67108864" doc:"Largest body transformed, in bytes (as sent by the upstream, and again after decompression). Default 1048576."`

	res     []*regexp.Regexp
	setVals map[string]any
	setKeys []string
}

// BodyReplacement is one replace rule of response-body-transform.
type BodyReplacement struct {
	Pattern string `json:"pattern" schema:"required,minLength=1" doc:"RE2 regular expression, compiling to at most 10000 instructions (a counted repetition such as x{100} is that many copies of x)."`
	With    string `json:"with" schema:"text" doc:"Replacement; $1 or ${name} insert submatches."`
}

// SetDefaults implements schema.Defaulter.
func (h *ResponseBodyTransform) SetDefaults() {
	h.Replace = []BodyReplacement{}
	h.JSONRemove = []string{}
	h.JSONSet = map[string]json.RawMessage{}
	h.ContentTypes = []string{"application/json", "text/html", "text/plain"}
	h.MaxBodyBytes = 1 << 20
}

// CaddyModule returns the Caddy module information.
func (*ResponseBodyTransform) CaddyModule() caddy.ModuleInfo {
	return plugins.ModuleInfo[ResponseBodyTransform]("response-body-transform")
}

// Provision checks the config with the admin API's rules (Caddy itself
// only calls Validate) and compiles the rules.
func (h *ResponseBodyTransform) Provision(caddy.Context) error {
	if err := schema.Check(h); err != nil {
		return err
	}
	h.res = make([]*regexp.Regexp, len(h.Replace))
	for i, rp := range h.Replace {
		re, err := regexp.Compile(rp.Pattern)
		if err != nil {
			return schema.Errorf(idx("replace", i)+".pattern", "must be a valid RE2 regular expression: %v", err)
		}
		h.res[i] = re
	}
	h.setVals = map[string]any{}
	h.setKeys = sortedKeys(h.JSONSet)
	for _, k := range h.setKeys {
		v, err := decodeOrdered(h.JSONSet[k])
		if err != nil {
			return schema.Errorf("json_set."+k, "must be a JSON value")
		}
		h.setVals[k] = v
	}
	return nil
}

// ValidateInput implements plugins.InputValidator: the patterns' program
// size (regexsize), for new configs only. A pattern over the bound stored
// before the bound existed still loads, as a route expression does:
// refusing it at load kept the whole stored configuration from loading.
func (h *ResponseBodyTransform) ValidateInput() error {
	for i, rp := range h.Replace {
		if err := regexsize.Check(rp.Pattern); err != nil {
			return schema.Errorf(idx("replace", i)+".pattern", "must be a valid RE2 regular expression: %v", err)
		}
	}
	return nil
}

// Validate implements schema.Validator and caddy.Validator. Patterns are
// parsed, not compiled: on the admin API's path their size is checked
// (ValidateInput) before anything compiles them.
func (h *ResponseBodyTransform) Validate() error {
	for i, rp := range h.Replace {
		if _, err := syntax.Parse(rp.Pattern, syntax.Perl); err != nil {
			return schema.Errorf(idx("replace", i)+".pattern", "must be a valid RE2 regular expression: %v", err)
		}
	}
	for i, p := range h.JSONRemove {
		if !validJSONPath(p) {
			return schema.Errorf(idx("json_remove", i), "must be a dotted path (a.b.c)")
		}
	}
	for _, k := range sortedKeys(h.JSONSet) {
		if !validJSONPath(k) {
			return schema.Errorf("json_set."+k, "key must be a dotted path (a.b.c)")
		}
		if !json.Valid(h.JSONSet[k]) {
			return schema.Errorf("json_set."+k, "must be a JSON value")
		}
	}
	for i, ct := range h.ContentTypes {
		if !validMediaRange(ct) {
			return schema.Errorf(idx("content_types", i), "must be a media type (type/subtype or type/*)")
		}
	}
	return nil
}

func validJSONPath(p string) bool {
	for _, seg := range strings.Split(p, ".") {
		if seg == "" {
			return false
		}
	}
	return true
}

// ServeHTTP buffers and transforms eligible responses.
func (h *ResponseBodyTransform) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if len(h.Replace) == 0 && len(h.JSONRemove) == 0 && len(h.JSONSet) == 0 {
		return next.ServeHTTP(w, r)
	}
	if r.Method == http.MethodHead {
		// No body to transform, but the upstream's Content-Length is that of
		// the untransformed body: a HEAD must not announce a length the GET
		// would not have.
		return next.ServeHTTP(&headLength{ResponseWriterWrapper: &caddyhttp.ResponseWriterWrapper{ResponseWriter: w}, h: h}, r)
	}
	bw := &bodyBuffer{ResponseWriterWrapper: &caddyhttp.ResponseWriterWrapper{ResponseWriter: w}, h: h}
	if err := next.ServeHTTP(bw, r); err != nil {
		return err // a buffered partial response is dropped; Caddy answers the error
	}
	return bw.finish()
}

// headLength drops the Content-Length of a HEAD response whose GET would be
// transformed.
type headLength struct {
	*caddyhttp.ResponseWriterWrapper
	h    *ResponseBodyTransform
	done bool
}

func (w *headLength) WriteHeader(status int) {
	if !w.done && status >= 200 {
		w.done = true
		if w.h.eligible(status, w.Header()) {
			w.Header().Del("Content-Length")
		}
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *headLength) Write(p []byte) (int, error) {
	if !w.done {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// eligible reports whether a response with this status and header is
// buffered.
func (h *ResponseBodyTransform) eligible(status int, hdr http.Header) bool {
	switch {
	case status < 200, status == http.StatusNoContent, status == http.StatusPartialContent, status == http.StatusNotModified:
		return false
	}
	if cl := hdr.Get("Content-Length"); cl != "" {
		if n, err := strconv.ParseInt(cl, 10, 64); err != nil || n > h.MaxBodyBytes {
			return false
		}
	}
	switch strings.ToLower(hdr.Get("Content-Encoding")) {
	case "", "identity", "gzip", "zstd":
	default:
		return false
	}
	// An event stream is delivered event by event and may never end:
	// held back, its events would wait for max_body_bytes (text/*
	// covers it).
	return !gwctx.IsEventStream(hdr) && mediaTypeIn(mediaType(hdr), h.ContentTypes)
}

// mediaType is the lowercased media type of the Content-Type, without
// parameters.
func mediaType(hdr http.Header) string {
	mt, _, _ := strings.Cut(hdr.Get("Content-Type"), ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

func mediaTypeIn(mt string, list []string) bool {
	if mt == "" {
		return false
	}
	for _, ct := range list {
		ct = strings.ToLower(ct)
		if ct == mt || (strings.HasSuffix(ct, "/*") && strings.HasPrefix(mt, ct[:len(ct)-1])) {
			return true
		}
	}
	return false
}

// maxTransformedBytes bounds the body while the replace rules run. Each
// rule can multiply the body's size (a pattern matching every character,
// or an empty string, with a long replacement or many $0): without a
// bound, one response could make the gateway allocate until the process
// dies. It is the largest max_body_bytes.
const maxTransformedBytes = 64 << 20

// transform applies the rules to a plain body; ok is false (and the body
// is to be sent unchanged) when a replacement would make it larger than
// maxTransformedBytes.
func (h *ResponseBodyTransform) transform(body []byte, mt string) (out []byte, ok bool) {
	for i, re := range h.res {
		if body, ok = replaceBounded(re, body, h.Replace[i].With, maxTransformedBytes); !ok {
			return nil, false
		}
	}
	if (len(h.JSONRemove) == 0 && len(h.setKeys) == 0) || !(mt == "application/json" || strings.HasSuffix(mt, "+json")) {
		return body, true
	}
	doc, err := decodeOrdered(body)
	if err != nil {
		return body, true // not JSON after all (or nested too deeply): leave it
	}
	for _, p := range h.JSONRemove {
		doc = jsonRemove(doc, strings.Split(p, "."))
	}
	for _, k := range h.setKeys {
		doc = jsonSet(doc, strings.Split(k, "."), h.setVals[k])
	}
	var buf bytes.Buffer
	encodeOrdered(&buf, doc)
	return buf.Bytes(), true
}

// replaceBounded is re.ReplaceAll(body, with), unless its result could be
// larger than limit (then ok is false and nothing large was allocated).
// A match's replacement is at most len(with) bytes plus, for each "$" in
// with, one submatch, which is no longer than the match: when even a match
// at every position stays within limit, no count is needed; otherwise a
// first pass (ReplaceAllFunc finds the same matches as ReplaceAll) adds
// up that bound match by match.
func replaceBounded(re *regexp.Regexp, body []byte, with string, limit int) ([]byte, bool) {
	n, lit, refs := len(body), len(with), strings.Count(with, "$")
	if n+(n+1)*lit+refs*n > limit {
		total := n
		re.ReplaceAllFunc(body, func(m []byte) []byte {
			if total <= limit {
				total += lit + refs*len(m)
			}
			return nil
		})
		if total > limit {
			return nil, false
		}
	}
	return re.ReplaceAll(body, []byte(with)), true
}

// ---- the buffering response writer ----

const (
	undecided = iota
	buffering
	passing
)

type bodyBuffer struct {
	*caddyhttp.ResponseWriterWrapper
	h      *ResponseBodyTransform
	mode   int
	status int
	buf    bytes.Buffer
}

func (w *bodyBuffer) WriteHeader(status int) {
	if w.mode != undecided {
		return
	}
	if status >= 100 && status < 200 && status != http.StatusSwitchingProtocols {
		w.ResponseWriter.WriteHeader(status) // informational: pass on
		return
	}
	w.status = status
	if w.h.eligible(status, w.Header()) {
		w.mode = buffering
		return
	}
	w.mode = passing
	w.ResponseWriter.WriteHeader(status)
}

func (w *bodyBuffer) Write(p []byte) (int, error) {
	if w.mode == undecided {
		w.WriteHeader(http.StatusOK)
	}
	if w.mode == passing {
		return w.ResponseWriter.Write(p)
	}
	if int64(w.buf.Len()+len(p)) > w.h.MaxBodyBytes {
		// too large after all: send what we have and stream the rest
		if err := w.passThrough(); err != nil {
			return 0, err
		}
		return w.ResponseWriter.Write(p)
	}
	return w.buf.Write(p)
}

// ReadFrom keeps io.Copy from bypassing Write.
func (w *bodyBuffer) ReadFrom(r io.Reader) (int64, error) {
	if w.mode == passing {
		return w.ResponseWriterWrapper.ReadFrom(r)
	}
	return io.Copy(writerOnly{w}, r)
}

// FlushError implements the interface http.ResponseController looks for:
// flushing a buffered response is a no-op.
func (w *bodyBuffer) FlushError() error {
	if w.mode == undecided {
		w.WriteHeader(http.StatusOK)
	}
	if w.mode == buffering {
		return nil
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *bodyBuffer) passThrough() error {
	w.mode = passing
	w.ResponseWriter.WriteHeader(w.status)
	_, err := w.ResponseWriter.Write(w.buf.Bytes())
	w.buf = bytes.Buffer{}
	return err
}

// finish sends a buffered response, transformed.
func (w *bodyBuffer) finish() error {
	if w.mode != buffering {
		return nil
	}
	hdr := w.Header()
	encoding := strings.ToLower(hdr.Get("Content-Encoding"))
	raw := w.buf.Bytes()
	plain, err := decodeBody(encoding, raw, w.h.MaxBodyBytes)
	if err != nil {
		return w.passThrough()
	}
	out, ok := w.h.transform(plain, mediaType(hdr))
	if !ok || bytes.Equal(out, plain) {
		// too large once transformed, or nothing changed: the original
		// bytes (ETag kept)
		return w.passThrough()
	}
	if out, err = encodeBody(encoding, out); err != nil {
		return w.passThrough()
	}
	hdr.Set("Content-Length", strconv.Itoa(len(out)))
	hdr.Del("ETag")
	hdr.Del("Content-MD5")
	w.ResponseWriter.WriteHeader(w.status)
	_, err = w.ResponseWriter.Write(out)
	return err
}

type writerOnly struct{ io.Writer }

// ---- content codings ----

// zstdEncoder is shared (EncodeAll is safe for concurrent use).
var zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) { return zstd.NewWriter(nil) })

// decodeBody undoes the content coding, refusing results over limit.
func decodeBody(encoding string, b []byte, limit int64) ([]byte, error) {
	var r io.Reader
	switch encoding {
	case "", "identity":
		return b, nil
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		r = zr
	case "zstd":
		zr, err := zstd.NewReader(bytes.NewReader(b), zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		r = zr
	default:
		return nil, errUnsupportedCoding
	}
	out, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(out)) > limit {
		return nil, errTooLarge
	}
	return out, nil
}

func encodeBody(encoding string, b []byte) ([]byte, error) {
	switch encoding {
	case "", "identity":
		return b, nil
	case "gzip":
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(b); err != nil {
			return nil, err
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case "zstd":
		enc, err := zstdEncoder()
		if err != nil {
			return nil, err
		}
		return enc.EncodeAll(b, nil), nil
	}
	return nil, errUnsupportedCoding
}

var (
	errUnsupportedCoding = errors.New("unsupported content coding")
	errTooLarge          = errors.New("body too large")
)

// ---- JSON with key order kept ----

// object is a JSON object that keeps its keys' order.
type object struct {
	keys []string
	vals map[string]any
}

// decodeOrdered decodes JSON into nil, bool, json.Number, string, []any and
// *object values.
func decodeOrdered(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errTrailing
	}
	return v, nil
}

var (
	errTrailing = errors.New("trailing data after JSON value")
	errTooDeep  = errors.New("JSON nested too deeply")
)

// maxJSONDepth is the deepest nesting decodeValue follows (encoding/json's
// own limit). Each level is a recursive call: an upstream body of a few
// MiB of "[" would otherwise exhaust the goroutine's stack, a fatal error
// that ends the process.
const maxJSONDepth = 10000

func decodeValue(dec *json.Decoder, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); ok && (d == '{' || d == '[') && depth >= maxJSONDepth {
		return nil, errTooDeep
	}
	switch tok {
	case json.Delim('{'):
		o := &object{vals: map[string]any{}}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k := kt.(string)
			v, err := decodeValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			if _, dup := o.vals[k]; !dup {
				o.keys = append(o.keys, k)
			}
			o.vals[k] = v
		}
		_, err := dec.Token() // }
		return o, err
	case json.Delim('['):
		arr := []any{}
		for dec.More() {
			v, err := decodeValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := dec.Token() // ]
		return arr, err
	}
	return tok, nil
}

// encodeOrdered writes v as compact JSON without HTML escaping.
func encodeOrdered(buf *bytes.Buffer, v any) {
	switch v := v.(type) {
	case *object:
		buf.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			encodeScalar(buf, k)
			buf.WriteByte(':')
			encodeOrdered(buf, v.vals[k])
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				buf.WriteByte(',')
			}
			encodeOrdered(buf, e)
		}
		buf.WriteByte(']')
	default:
		encodeScalar(buf, v)
	}
}

func encodeScalar(buf *bytes.Buffer, v any) {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	buf.Truncate(buf.Len() - 1) // Encode's newline
}

// jsonRemove deletes the value at path (absent paths are left alone).
func jsonRemove(doc any, path []string) any {
	if len(path) == 0 {
		return doc
	}
	last := len(path) == 1
	switch d := doc.(type) {
	case *object:
		v, ok := d.vals[path[0]]
		if !ok {
			return doc
		}
		if last {
			delete(d.vals, path[0])
			for i, k := range d.keys {
				if k == path[0] {
					d.keys = append(d.keys[:i], d.keys[i+1:]...)
					break
				}
			}
			return doc
		}
		d.vals[path[0]] = jsonRemove(v, path[1:])
	case []any:
		i, err := strconv.Atoi(path[0])
		if err != nil || i < 0 || i >= len(d) {
			return doc
		}
		if last {
			return append(d[:i], d[i+1:]...)
		}
		d[i] = jsonRemove(d[i], path[1:])
	}
	return doc
}

// jsonSet sets the value at path, creating missing objects on the way; a
// path through a scalar, or an array index out of range, is left alone.
func jsonSet(doc any, path []string, val any) any {
	if len(path) == 0 {
		return val
	}
	switch d := doc.(type) {
	case *object:
		cur, ok := d.vals[path[0]]
		if !ok {
			if len(path) > 1 {
				cur = &object{vals: map[string]any{}}
			}
			d.keys = append(d.keys, path[0])
		}
		d.vals[path[0]] = jsonSet(cur, path[1:], val)
	case []any:
		i, err := strconv.Atoi(path[0])
		if err != nil || i < 0 || i >= len(d) {
			return doc
		}
		d[i] = jsonSet(d[i], path[1:], val)
	}
	return doc
}

// Interface guards
var (
	_ plugins.Plugin         = (*ResponseBodyTransform)(nil)
	_ plugins.InputValidator = (*ResponseBodyTransform)(nil)
)
