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
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gateway/gateway/internal/placeholders"
	"github.com/caddy-gateway/gateway/schema"
)

// Handler is what every plugin type's module is.
type Handler interface {
	caddy.Module
	caddyhttp.MiddlewareHandler
}

// Plugin is everything a plugin type's module implements: Provision runs
// schema.Check (the admin API's rules, so plain Caddy JSON is held to them
// too) and Validate only the rules the tags cannot say. Register refuses a
// type whose module is not one; each type asserts it at the bottom of its
// file. Its Caddyfile directive is parsed by the module's
// UnmarshalCaddyfile (caddyfile.Unmarshaler) when it has syntax beyond the
// generic one, else by UnmarshalCaddyfile from the struct.
type Plugin interface {
	Handler
	caddy.Provisioner
	caddy.Validator
	schema.Defaulter
}

// Type declares a plugin type.
type Type struct {
	// Name is the API's PluginType, e.g. "key-auth".
	Name string
	// Ordering is the default ordering of an instance (plugins run in
	// ascending ordering). It also places the type's Caddyfile directive
	// (see caddyfileBands).
	Ordering int
	// Outer: the type observes the whole request whatever its ordering
	// (http-log: in the gateway the router builds the request record for
	// it), so its Caddyfile directive goes before every other gateway
	// directive.
	Outer bool
	// Extension marks a type beside the contract's plugin types (the
	// OpenAPI document and docs/plugins.md say so).
	Extension bool
	// Doc says what the type does, for people: the OpenAPI document and
	// docs/plugins.md (generated) show it.
	Doc string
	// New returns a fresh config with no defaults applied (schema.Decode
	// applies SetDefaults).
	New func() Plugin
}

// ModuleName is the handler name of the type's Caddy module
// ("key-auth" → "gateway_key_auth"), also its Caddyfile directive.
func (t Type) ModuleName() string { return ModuleName(t.Name) }

// ModuleName maps a plugin type name to its handler module name.
func ModuleName(typeName string) string {
	return "gateway_" + strings.ReplaceAll(typeName, "-", "_")
}

var (
	mu    sync.RWMutex
	types = map[string]Type{}
	// banded holds the orderings already placed in each Caddyfile band.
	banded = map[int][]int{}
)

// caddyfileBands place the gateway's Caddyfile directives among Caddy's
// standard ones by their default ordering, so that a Caddyfile runs them in
// the order the gateway does: a type goes into the first band whose upTo
// exceeds its ordering (an Outer type into the first band), directly before
// or after the band's anchor, a directive of Caddy's standard distribution
// (Caddy allows no other anchor). Consecutive bands sit in consecutive
// gaps of Caddy's order, so the gateway directives follow one another in
// ordering order, with Caddy's own directives between groups (the auth
// directives after forward_auth, the header transforms around encode …).
var caddyfileBands = []struct {
	upTo   int
	pos    httpcaddyfile.Positional
	anchor string
}{
	{0, httpcaddyfile.After, "log_level"},            // Outer: http-log
	{250, httpcaddyfile.Before, "header"},            // request-id, ip-restriction
	{300, httpcaddyfile.After, "header"},             // waf
	{400, httpcaddyfile.Before, "request_body"},      // cors
	{500, httpcaddyfile.Before, "redir"},             // redirect
	{700, httpcaddyfile.After, "forward_auth"},       // key-auth, basic-auth, jwt, acl
	{800, httpcaddyfile.Before, "request_header"},    // rate-limit
	{1000, httpcaddyfile.After, "request_header"},    // request-size-limit, request-termination
	{1100, httpcaddyfile.Before, "encode"},           // proxy-cache
	{1200, httpcaddyfile.After, "encode"},            // request-transform
	{1300, httpcaddyfile.Before, "push"},             // wasm
	{math.MaxInt32 + 1, httpcaddyfile.After, "push"}, // response-transform … hsts
}

func caddyfileBand(t Type) int {
	if t.Outer {
		return 0
	}
	for i := 1; i < len(caddyfileBands); i++ {
		if t.Ordering < caddyfileBands[i].upTo {
			return i
		}
	}
	return len(caddyfileBands) - 1
}

// Register adds the types to the registry: it registers each one's Caddy
// module, its Caddyfile directive (gateway_<name>, see Plugin) and the
// directive's place in Caddy's directive order (from its ordering, see
// caddyfileBands). Call it from init, once per package with all the
// package's types: directives sharing a band are inserted in ordering
// order, and a later call that would break that order panics.
func Register(ts ...Type) {
	mu.Lock()
	defer mu.Unlock()
	ts = slices.Clone(ts)
	slices.SortStableFunc(ts, func(a, b Type) int { return cmp.Compare(a.Ordering, b.Ordering) })
	// Inserting directly after an anchor puts the later insert first.
	for _, t := range slices.Backward(ts) {
		if caddyfileBands[caddyfileBand(t)].pos == httpcaddyfile.After {
			register(t)
		}
	}
	for _, t := range ts {
		if caddyfileBands[caddyfileBand(t)].pos == httpcaddyfile.Before {
			register(t)
		}
	}
}

func register(t Type) {
	if _, dup := types[t.Name]; dup {
		panic("plugins: duplicate type " + t.Name)
	}
	if t.Ordering < 1 || t.Ordering > math.MaxInt32 {
		panic(fmt.Sprintf("plugins: type %s has no default ordering (1..%d)", t.Name, math.MaxInt32))
	}
	mod := t.New()
	if got, want := string(mod.CaddyModule().ID), "http.handlers."+t.ModuleName(); got != want {
		panic(fmt.Sprintf("plugins: type %s has module ID %s, want %s", t.Name, got, want))
	}
	band := caddyfileBand(t)
	b := caddyfileBands[band]
	for _, o := range banded[band] {
		if (b.pos == httpcaddyfile.Before && o > t.Ordering) || (b.pos == httpcaddyfile.After && o < t.Ordering) {
			panic(fmt.Sprintf("plugins: type %s (ordering %d) registered after a type of ordering %d in the same Caddyfile band: register a package's types in one call", t.Name, t.Ordering, o))
		}
	}
	banded[band] = append(banded[band], t.Ordering)
	types[t.Name] = t
	caddy.RegisterModule(mod)
	dir := t.ModuleName()
	httpcaddyfile.RegisterHandlerDirective(dir, func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		m := t.New()
		var err error
		if u, ok := m.(caddyfile.Unmarshaler); ok {
			err = u.UnmarshalCaddyfile(h.Dispenser)
		} else {
			err = UnmarshalCaddyfile(h.Dispenser, m, Syntax{})
		}
		if err != nil {
			return nil, err
		}
		return m, nil
	})
	httpcaddyfile.RegisterDirectiveOrder(dir, b.pos, b.anchor)
}

// ModuleInfo is the Caddy module information of the plugin type typeName
// whose config struct is T: the module ID http.handlers.gateway_<type> (see
// ModuleName) and instances that start from the type's defaults, so that
// plain Caddy JSON that leaves fields out gets the same defaults as the
// admin API and the Caddyfile. Each type's CaddyModule returns it.
func ModuleInfo[T any, P interface {
	*T
	Plugin
}](typeName string) caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID: caddy.ModuleID("http.handlers." + ModuleName(typeName)),
		New: func() caddy.Module {
			p := P(new(T))
			p.SetDefaults()
			return p
		},
	}
}

// The registered type names are the values of the schema enum @plugin-type
// (the type field of the stored plugin, the API's PluginType).
func init() { schema.RegisterEnum("plugin-type", Names) }

// Names lists the registered type names in default ordering.
func Names() []string {
	ts := Types()
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
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

// InputValidator is implemented by plugin configs with rules for new
// configs only (the admin API's writes and imports, through
// NormalizeConfig), which Provision does not check: a stored config
// written before the rule existed still loads, and only its next change
// must follow it. For bounds that cannot be lowered to pass (the size of
// a wasm plugin's free-form config), where a number is clamped at the
// upgrade instead (UpgradeStored).
type InputValidator interface {
	ValidateInput() error
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
	if v, ok := cfg.(InputValidator); ok {
		if err := v.ValidateInput(); err != nil {
			return nil, schema.Prefix("config", err)
		}
	}
	out, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding %s config: %w", typeName, err)
	}
	return out, nil
}

// HandlerJSON is the Caddy JSON of a plugin instance as an inline handler
// (ConfigJSON plus the "handler" key).
func HandlerJSON(typeName string, config json.RawMessage, internal map[string]any) (json.RawMessage, error) {
	m, err := configMap(typeName, config, internal)
	if err != nil {
		return nil, err
	}
	m["handler"] = ModuleName(typeName)
	return json.Marshal(m)
}

// ConfigJSON is the module config of a plugin instance: its normalized
// config plus those of the compiler's internal fields (e.g. "instance_id")
// that the type declares (Caddy decodes module configs strictly).
func ConfigJSON(typeName string, config json.RawMessage, internal map[string]any) (json.RawMessage, error) {
	m, err := configMap(typeName, config, internal)
	if err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

func configMap(typeName string, config json.RawMessage, internal map[string]any) (map[string]any, error) {
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
	declared := schema.FieldIndex(reflect.TypeOf(t.New()))
	if err := fillDefaults(t, m, declared); err != nil {
		return nil, err
	}
	for k, v := range internal {
		if _, ok := declared[k]; ok {
			m[k] = v
		}
	}
	return m, nil
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
func decodeLoose(typeName string, config json.RawMessage) (Plugin, bool) {
	t, ok := Lookup(typeName)
	if !ok {
		return nil, false
	}
	cfg := t.New()
	cfg.SetDefaults()
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

// fillDefaults adds to m, a stored config, today's default of every API
// field it lacks: a config stored before a field was declared (an
// upgraded store) reaches Provision as the API would answer it, not with
// the field's zero value, which the type's rules may refuse (an enum) or
// read differently (a boolean that defaults to true).
func fillDefaults(t Type, m map[string]any, declared map[string][]int) error {
	var defaults reflect.Value
	for name, index := range declared {
		if _, ok := m[name]; ok {
			continue
		}
		if !defaults.IsValid() {
			cfg := t.New()
			cfg.SetDefaults()
			defaults = reflect.ValueOf(cfg).Elem()
		}
		f := defaults.Type().FieldByIndex(index)
		if strings.Contains(f.Tag.Get("schema"), "internal") {
			continue
		}
		raw, err := json.Marshal(defaults.FieldByIndex(index).Interface())
		if err != nil {
			return fmt.Errorf("default of %s.%s: %w", t.Name, name, err)
		}
		m[name] = json.RawMessage(raw)
	}
	return nil
}

// UpgradeStored brings a stored config of type typeName, written before
// some of today's rules, within two of them: a number above a maximum
// added since is lowered to it (schema.ClampMax), and a placeholder that
// values may no longer use ({env.*}, {file.*}, {system.*} …) is escaped to
// literal text (placeholders.EscapeDenied) instead of failing the load.
// It returns the fields it changed (config.max_age_s) and the config with
// them changed, its other keys as stored. A config that passes the type's
// rules, or one that cannot be read, is returned as is with no names.
func UpgradeStored(typeName string, config json.RawMessage) (json.RawMessage, []string, error) {
	cfg, ok := decodeLoose(typeName, config)
	if !ok || schema.Check(cfg) == nil {
		return config, nil, nil
	}
	names := append(schema.ClampMax(cfg), schema.RewritePlaceholderValues(cfg, placeholders.EscapeDenied)...)
	if len(names) == 0 {
		return config, nil, nil
	}
	m := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(config)) > 0 {
		if err := json.Unmarshal(config, &m); err != nil || m == nil {
			return config, nil, nil
		}
	}
	rv := reflect.ValueOf(cfg).Elem()
	index := schema.FieldIndex(rv.Type())
	for _, n := range names {
		raw, err := json.Marshal(rv.FieldByIndex(index[n]).Interface())
		if err != nil {
			return nil, nil, err
		}
		m[n] = raw
	}
	out, err := json.Marshal(m)
	if err != nil {
		return nil, nil, err
	}
	return out, prefixAll("config.", names), nil
}
