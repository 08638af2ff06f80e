// Package plugins holds the gateway's plugin types. Each type is one Caddy
// HTTP handler module (http.handlers.gateway_<type>) whose struct is the
// plugin's whole declaration: its JSON fields are the plugin config of the
// admin API, SetDefaults gives the defaults shown in answers, the `schema`
// tags and Validate are the validation, and the OpenAPI schema is generated
// from it. Register adds a type to the registry the admin API, the config
// compiler and the OpenAPI document read.
package plugins

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gateway/gateway/schema"
)

// Handler is what every plugin type's module is.
type Handler interface {
	caddy.Module
	caddyhttp.MiddlewareHandler
}

// Type declares a plugin type.
type Type struct {
	// Name is the API's PluginType, e.g. "key-auth".
	Name string
	// Ordering is the default ordering of an instance.
	Ordering int
	// Doc says what the type does, for people: the OpenAPI document and
	// docs/plugins.md (generated) show it.
	Doc string
	// New returns a fresh config with no defaults applied (schema.Decode
	// applies SetDefaults).
	New func() Handler
}

// ModuleName is the handler name of the type's Caddy module
// ("key-auth" → "gateway_key_auth").
func (t Type) ModuleName() string { return ModuleName(t.Name) }

// ModuleName maps a plugin type name to its handler module name.
func ModuleName(typeName string) string {
	return "gateway_" + strings.ReplaceAll(typeName, "-", "_")
}

var (
	mu    sync.RWMutex
	types = map[string]Type{}
)

// Register adds t to the registry and registers its Caddy module. Call it
// from init.
func Register(t Type) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := types[t.Name]; dup {
		panic("plugins: duplicate type " + t.Name)
	}
	mod := t.New()
	if got, want := string(mod.CaddyModule().ID), "http.handlers."+t.ModuleName(); got != want {
		panic(fmt.Sprintf("plugins: type %s has module ID %s, want %s", t.Name, got, want))
	}
	types[t.Name] = t
	caddy.RegisterModule(defaulted{mod, t})
}

// defaulted registers a plugin type's module so that Caddy's instances
// start from the type's defaults: plain Caddy JSON that leaves fields out
// gets the same defaults as the admin API and the Caddyfile.
type defaulted struct {
	Handler
	t Type
}

func (d defaulted) CaddyModule() caddy.ModuleInfo {
	info := d.Handler.CaddyModule()
	info.New = func() caddy.Module {
		m := d.t.New()
		if df, ok := m.(schema.Defaulter); ok {
			df.SetDefaults()
		}
		return m
	}
	return info
}

// RegisterDirective makes the registered type name usable as the Caddyfile
// directive gateway_<name>, parsed by the type's UnmarshalCaddyfile (the
// directive's order is the caller's to register). Call it from init after
// Register.
func RegisterDirective(name string) {
	t, ok := Lookup(name)
	if !ok {
		panic("plugins: directive for unregistered type " + name)
	}
	dir := t.ModuleName()
	httpcaddyfile.RegisterHandlerDirective(dir, func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		m := t.New()
		u, ok := m.(caddyfile.Unmarshaler)
		if !ok {
			return nil, h.Errf("%s has no Caddyfile syntax", dir)
		}
		if err := u.UnmarshalCaddyfile(h.Dispenser); err != nil {
			return nil, err
		}
		return m, nil
	})
}

// Lookup finds a registered type.
func Lookup(name string) (Type, bool) {
	mu.RLock()
	defer mu.RUnlock()
	t, ok := types[name]
	return t, ok
}

// Types lists the registered types in default ordering.
func Types() []Type {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]Type, 0, len(types))
	for _, t := range types {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ordering < out[j].Ordering })
	return out
}

// NormalizeConfig validates a plugin config of type typeName and returns it
// with every field present, defaults filled in. Errors name the field
// ("config.limit: is required").
func NormalizeConfig(typeName string, raw json.RawMessage) (json.RawMessage, error) {
	t, ok := Lookup(typeName)
	if !ok {
		return nil, schema.Errorf("type", "unknown plugin type %q", typeName)
	}
	cfg := t.New()
	if err := schema.DecodeValue(raw, cfg); err != nil {
		return nil, schema.Prefix("config", err)
	}
	out, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding %s config: %w", typeName, err)
	}
	return out, nil
}

// HandlerJSON is the Caddy JSON of a plugin instance: its normalized config
// plus the "handler" key and those of the compiler's internal fields (e.g.
// "instance_id") that the type declares (Caddy decodes module configs
// strictly).
func HandlerJSON(typeName string, config json.RawMessage, internal map[string]any) (json.RawMessage, error) {
	t, ok := Lookup(typeName)
	if !ok {
		return nil, fmt.Errorf("unknown plugin type %q", typeName)
	}
	m := map[string]any{}
	if len(config) > 0 {
		// numbers stay as written (float64 would round large integers)
		dec := json.NewDecoder(bytes.NewReader(config))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			return nil, fmt.Errorf("plugin config of type %s: %w", typeName, err)
		}
	}
	declared := jsonFieldNames(t.New())
	for k, v := range internal {
		if declared[k] {
			m[k] = v
		}
	}
	m["handler"] = ModuleName(typeName)
	return json.Marshal(m)
}

func jsonFieldNames(v any) map[string]bool {
	out := map[string]bool{}
	rt := reflect.TypeOf(v)
	for rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
	}
	for i := 0; i < rt.NumField(); i++ {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out[name] = true
		}
	}
	return out
}

// RedactConfig returns a plugin config of type typeName with the values of
// its secret fields (`schema:"secret"`) replaced by schema.Redacted, and the
// names of those fields ("config.headers.Authorization"): what viewers and
// exports without secrets see. A config without secrets is returned as is.
func RedactConfig(typeName string, config json.RawMessage) (json.RawMessage, []string) {
	cfg, ok := decodeLoose(typeName, config)
	if !ok {
		return config, nil
	}
	names := schema.Redact(cfg)
	if len(names) == 0 {
		return config, nil
	}
	out, err := json.Marshal(cfg)
	if err != nil {
		return json.RawMessage(`{}`), names
	}
	return out, prefixAll("config.", names)
}

// RedactedInConfig names the secret fields of a plugin config that hold a
// redacted value (a config from a redacted answer or export).
func RedactedInConfig(typeName string, config json.RawMessage) []string {
	cfg, ok := decodeLoose(typeName, config)
	if !ok {
		return nil
	}
	return prefixAll("config.", schema.RedactedFields(cfg))
}

// decodeLoose decodes a stored or imported config over the type's defaults,
// without validating it.
func decodeLoose(typeName string, config json.RawMessage) (Handler, bool) {
	t, ok := Lookup(typeName)
	if !ok {
		return nil, false
	}
	cfg := t.New()
	if d, ok := cfg.(schema.Defaulter); ok {
		d.SetDefaults()
	}
	if len(config) > 0 && json.Unmarshal(config, cfg) != nil {
		return nil, false
	}
	return cfg, true
}

func prefixAll(p string, names []string) []string {
	for i := range names {
		names[i] = p + names[i]
	}
	return names
}
