package traffic

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gateway/gateway/internal/consumers"
	"github.com/caddy-gateway/gateway/internal/gwctx"
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/schema"
)

// RequestID is the request-id plugin: every request carries an id in a
// header, sent upstream and (echo_downstream) back to the client. The id is
// also the request record's request_id and the placeholder
// {http.vars.request_id}.
//
// Caddyfile: the generic syntax of plugins.UnmarshalCaddyfile:
//
//	gateway_request_id {
//	    header_name X-Correlation-ID
//	    trust_incoming false
//	    echo_downstream
//	}
type RequestID struct {
	HeaderName     string `json:"header_name" schema:"header_name,minLength=1" doc:"Header carrying the id, upstream and downstream. Default X-Request-ID."`
	TrustIncoming  bool   `json:"trust_incoming" doc:"Keep an id the client sent (1 to 200 visible ASCII characters) instead of generating one. When false, the client's copies of the header are removed, in any spelling an upstream reading CGI variables takes for it (_ for -, any case). Default true."`
	EchoDownstream bool   `json:"echo_downstream" doc:"Send the id back to the client in the response header. Default true."`

	header    string    // canonical HeaderName
	lookalike [1]string // header dash-spelled, for consumers.DeleteLookalikes
	dash      string    // header dash-spelled when HeaderName has '_', else ""
}

// SetDefaults implements schema.Defaulter.
func (h *RequestID) SetDefaults() {
	h.HeaderName = "X-Request-ID"
	h.TrustIncoming = true
	h.EchoDownstream = true
}

// CaddyModule returns the Caddy module information.
func (*RequestID) CaddyModule() caddy.ModuleInfo { return plugins.ModuleInfo[RequestID]("request-id") }

// Provision checks the config with the admin API's rules (Caddy itself
// only calls Validate).
func (h *RequestID) Provision(caddy.Context) error {
	if err := schema.Check(h); err != nil {
		return err
	}
	h.header = http.CanonicalHeaderKey(h.HeaderName)
	h.lookalike[0] = http.CanonicalHeaderKey(strings.ReplaceAll(h.header, "_", "-"))
	if h.lookalike[0] != h.header {
		h.dash = h.lookalike[0]
	}
	return nil
}

// Validate implements caddy.Validator (the tags say everything; Provision
// checks them).
func (h *RequestID) Validate() error { return nil }

// ServeHTTP assigns the id, then calls next.
func (h *RequestID) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	var id string
	if h.TrustIncoming {
		id = r.Header.Get(h.header)
		if !validIncomingID(id) {
			id = ""
		}
	}
	if id == "" {
		id = newUUID()
	}
	if !h.TrustIncoming {
		// The client's id spelled with '_' (X_Request_ID) would reach
		// CGI-style upstreams as the same header (HTTP_X_REQUEST_ID) next
		// to the gateway's; so would the dash spelling of a header_name
		// with '_'.
		consumers.DeleteLookalikes(r.Header, h.lookalike[:])
		if h.dash != "" {
			delete(r.Header, h.dash)
		}
	}
	info, r := gwctx.Ensure(r)
	info.RequestID = id
	caddyhttp.SetVar(r.Context(), "request_id", id)
	// Under the gateway's proxy server the echo is a hook of its writer
	// and the header values live there: nothing allocated.
	rw, _ := w.(*gwctx.RecordingWriter)
	if h.EchoDownstream && rw.OnHeader(h, gwctx.HookArgs{S: id}) {
		vals := rw.Values(2)
		vals[0], vals[1] = id, id
		r.Header[h.header] = vals[0:1:1]
		w.Header()[h.header] = vals[1:2:2]
		return next.ServeHTTP(w, r)
	}
	// One allocation holds the request's header values and, when the id
	// goes back to the client, the response header hook.
	st := &requestIDState{name: h.header, id: id}
	st.up[0] = id
	r.Header[h.header] = st.up[:]
	if h.EchoDownstream {
		// now, for responses made after this handler returns (proxy errors),
		// and again when the response is written, replacing an upstream copy
		st.down[0] = id
		w.Header()[h.header] = st.down[:]
		st.ResponseWriter, st.apply = w, st
		w = st
	}
	return next.ServeHTTP(w, r)
}

// ApplyHeader is the echo as a hook of the gateway's writer
// (gwctx.RecordingWriter.OnHeader); args.S is the id.
func (h *RequestID) ApplyHeader(hdr http.Header, args gwctx.HookArgs) {
	echoID(hdr, h.header, args.S)
}

// requestIDState is a request's id in its header values and the hook
// that echoes it in the response.
type requestIDState struct {
	headerHook
	name, id string
	up, down [1]string
}

// applyHeader sets the id on the response header (echoID).
func (st *requestIDState) applyHeader(hdr http.Header) { echoID(hdr, st.name, st.id) }

// echoID sets the id on the response header (replacing an upstream's
// copy); the value set before the request went upstream is kept when
// nothing changed it.
func echoID(hdr http.Header, name, id string) {
	if v := hdr[name]; len(v) == 1 && v[0] == id {
		return
	}
	hdr[name] = []string{id}
}

// newUUID returns a random (version 4) UUID in its canonical text form,
// from the runtime's per-thread ChaCha8 generator (seeded from the
// system's entropy): request ids must be unique, not secret, and this
// costs neither a system call nor a lock.
func newUUID() string {
	var u [16]byte
	binary.LittleEndian.PutUint64(u[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(u[8:], rand.Uint64())
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}

// validIncomingID accepts 1..200 visible ASCII characters: anything else
// (empty, oversized, control characters, spaces) is replaced by a fresh id.
func validIncomingID(id string) bool {
	if id == "" || len(id) > 200 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// Interface guards
var (
	_ plugins.Plugin   = (*RequestID)(nil)
	_ gwctx.HeaderHook = (*RequestID)(nil)
)
