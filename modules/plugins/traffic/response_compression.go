package traffic

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/encode"
	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp/encode/gzip" // http.encoders.gzip
	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp/encode/zstd" // http.encoders.zstd

	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/schema"
)

// ResponseCompression is the response-compression plugin: Caddy's own
// encode handler (http.handlers.encode), configured from the plugin's
// fields. The encoding is negotiated with the client's Accept-Encoding; the
// first of encodings wins a tie.
//
// Caddyfile: the generic syntax of plugins.UnmarshalCaddyfile:
//
//	gateway_response_compression {
//	    encodings gzip
//	    min_length 1024
//	    content_types application/json text/*
//	}
type ResponseCompression struct {
	Encodings    []string `json:"encodings" schema:"minItems=1,enum=zstd|gzip" doc:"Encodings offered, in order of preference. Default [\"zstd\",\"gzip\"]."`
	MinLength    int      `json:"min_length" schema:"min=0,max=1073741824" doc:"Smallest response (bytes) worth compressing. Default 512."`
	ContentTypes []string `json:"content_types" schema:"maxItems=100,maxLength=255" doc:"Media types to compress (type/subtype or type/*); empty: Caddy encode's defaults (text/*, JSON, XML, JavaScript, SVG, fonts …)."`

	enc *encode.Encode
}

// SetDefaults implements schema.Defaulter.
func (h *ResponseCompression) SetDefaults() {
	h.Encodings = []string{"zstd", "gzip"}
	h.MinLength = 512
	h.ContentTypes = []string{}
}

// CaddyModule returns the Caddy module information.
func (*ResponseCompression) CaddyModule() caddy.ModuleInfo {
	return plugins.ModuleInfo[ResponseCompression]("response-compression")
}

// Provision checks the config with the admin API's rules (Caddy itself
// only calls Validate) and loads the encode handler it maps to.
func (h *ResponseCompression) Provision(ctx caddy.Context) error {
	if err := schema.Check(h); err != nil {
		return err
	}
	raw, err := json.Marshal(h.encodeConfig())
	if err != nil {
		return err
	}
	mod, err := ctx.LoadModuleByID("http.handlers.encode", raw)
	if err != nil {
		return fmt.Errorf("loading encode handler: %w", err)
	}
	h.enc = mod.(*encode.Encode)
	return nil
}

// encodeConfig is the encode handler's config: min_length 0 ("compress
// everything") becomes 1, since encode reads 0 as its default of 512.
func (h *ResponseCompression) encodeConfig() *encode.Encode {
	cfg := &encode.Encode{
		EncodingsRaw: caddy.ModuleMap{},
		Prefer:       h.Encodings,
		MinLength:    max(h.MinLength, 1),
	}
	for _, e := range h.Encodings {
		cfg.EncodingsRaw[e] = json.RawMessage("{}")
	}
	if len(h.ContentTypes) > 0 {
		patterns := make([]string, len(h.ContentTypes))
		for i, ct := range h.ContentTypes {
			// a header pattern ending in * is a prefix match (parameters
			// such as "; charset=utf-8" follow the media type)
			patterns[i] = strings.TrimSuffix(strings.ToLower(ct), "*") + "*"
		}
		cfg.Matcher = &caddyhttp.ResponseMatcher{Headers: http.Header{"Content-Type": patterns}}
	}
	return cfg
}

// Validate implements schema.Validator and caddy.Validator.
func (h *ResponseCompression) Validate() error {
	seen := map[string]bool{}
	for i, e := range h.Encodings {
		if seen[e] {
			return schema.Errorf(idx("encodings", i), "is listed twice")
		}
		seen[e] = true
	}
	for i, ct := range h.ContentTypes {
		if !validMediaRange(ct) {
			return schema.Errorf(idx("content_types", i), "must be a media type (type/subtype or type/*)")
		}
	}
	return nil
}

// validMediaRange accepts type/subtype and type/* without parameters.
func validMediaRange(s string) bool {
	typ, sub, ok := strings.Cut(s, "/")
	if !ok || typ == "" || typ == "*" || sub == "" || strings.ContainsAny(s, ";, ") {
		return false
	}
	if sub == "*" {
		s = typ + "/x"
	}
	_, _, err := mime.ParseMediaType(s)
	return err == nil
}

// ServeHTTP compresses the response (Caddy's encode handler).
func (h *ResponseCompression) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	return h.enc.ServeHTTP(w, r, next)
}

// Interface guards
var (
	_ plugins.Plugin = (*ResponseCompression)(nil)
)
