package plugintest

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/schema"
)

// Config is what a plugin type makes of configs, the same way in every
// plugin package; Check checks it.
type Config struct {
	Type string
	// Normalized maps a config (JSON) to exactly what the admin API
	// normalizes it to (defaults filled in), in order.
	Normalized [][2]string
	// Refused maps a config the admin API refuses to the field its error
	// names, as the API shows it ("config.status"), optionally followed by
	// ": " and a part of the message ("config.ttl_s: must be at least 1").
	Refused map[string]string
	// Caddyfile maps a directive (with its block, as inside a site block)
	// to the handler JSON it adapts to (with the "handler" key).
	Caddyfile [][2]string
	// BadCaddyfile are directives the Caddyfile adapter refuses.
	BadCaddyfile []string
}

// Check checks every case of c.
func (c Config) Check(t *testing.T) {
	t.Helper()
	for _, n := range c.Normalized {
		got, err := plugins.NormalizeConfig(c.Type, json.RawMessage(n[0]))
		if err != nil {
			t.Errorf("%s %s: %v", c.Type, n[0], err)
			continue
		}
		if g, w := canonical(t, string(got)), canonical(t, n[1]); g != w {
			t.Errorf("%s %s normalized to\n %s\nwant\n %s", c.Type, n[0], g, w)
		}
	}
	for _, raw := range slices.Sorted(maps.Keys(c.Refused)) {
		want := c.Refused[raw]
		field, msg, _ := strings.Cut(want, ": ")
		_, err := plugins.NormalizeConfig(c.Type, json.RawMessage(raw))
		var fe *schema.FieldError
		if !errors.As(err, &fe) || fe.Field != field || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s %s: error %v, want one naming %s", c.Type, raw, err, want)
		}
	}
	for _, cf := range c.Caddyfile {
		WantCaddyfile(t, cf[0], cf[1])
	}
	for _, bad := range c.BadCaddyfile {
		if _, err := AdaptCaddyfile(t, bad); err == nil {
			t.Errorf("Caddyfile %q: no error", bad)
		}
	}
}

// canonical re-encodes a JSON document with sorted object keys.
func canonical(t *testing.T, doc string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatalf("bad JSON %s: %v", doc, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// HandlerJSON is the Caddy handler JSON of a plugin instance with the
// normalized config raw (what the gateway's compiler emits).
func HandlerJSON(t *testing.T, typeName, raw string) string {
	t.Helper()
	cfg, err := plugins.NormalizeConfig(typeName, json.RawMessage(raw))
	if err != nil {
		t.Fatalf("%s %s: %v", typeName, raw, err)
	}
	out, err := plugins.HandlerJSON(typeName, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// AdaptCaddyfile adapts a Caddyfile site body (the directives inside a site
// block) and returns the handler objects of the result in order.
func AdaptCaddyfile(t *testing.T, body string) ([]map[string]any, error) {
	t.Helper()
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte("http://127.0.0.1:0 {\n"+body+"\n}\n"), nil)
	if err != nil {
		return nil, err
	}
	var doc any
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	var hs []map[string]any
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if _, ok := v["handler"].(string); ok {
				hs = append(hs, v)
			}
			for _, k := range slices.Sorted(maps.Keys(v)) {
				walk(v[k])
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(doc)
	return hs, nil
}

// WantCaddyfile adapts body and checks that its handler named as in want
// equals want (JSON, with the "handler" key).
func WantCaddyfile(t *testing.T, body, want string) {
	t.Helper()
	hs, err := AdaptCaddyfile(t, body)
	if err != nil {
		t.Errorf("adapting %q: %v", body, err)
		return
	}
	var w map[string]any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want JSON: %v", err)
	}
	wb, _ := json.Marshal(w)
	for _, h := range hs {
		if h["handler"] == w["handler"] {
			if gb, _ := json.Marshal(h); !bytes.Equal(gb, wb) {
				t.Errorf("Caddyfile %q gave\n %s\nwant\n %s", body, gb, wb)
			}
			return
		}
	}
	t.Errorf("Caddyfile %q: no handler %v in %v", body, w["handler"], hs)
}
