package controlplane

import (
	"encoding/json"

	"gorm.io/gorm"

	"github.com/caddy-gateway/gateway/app/compiler"
	"github.com/caddy-gateway/gateway/schema"
	"github.com/caddy-gateway/gateway/storage"
)

// PluginRefs is what a feature gives the plugins of one type whose config
// names rows the feature owns (a wasm plugin's config.module names a module
// of app/wasmapi). The app adds it explicitly (AddPluginRefs, in its
// feature list); a plugin type without one references nothing.
type PluginRefs struct {
	// Check runs inside the transaction of every write of such a plugin
	// (the plugin API, the configuration import, applications), with the
	// normalized config: the rows it names must exist. A FieldError names
	// config.<field> (400).
	Check func(tx *gorm.DB, config json.RawMessage) error
	// Internals are the fields of the plugin's handler config compiled from
	// those rows (compiler.Options.PluginInternals).
	Internals compiler.TypeInternals
}

// AddPluginRefs gives the plugins of pluginType the feature's references
// (before the first Activate).
func (cp *ControlPlane) AddPluginRefs(pluginType string, refs PluginRefs) {
	if cp.pluginRefs == nil {
		cp.pluginRefs = map[string]PluginRefs{}
	}
	cp.pluginRefs[pluginType] = refs
}

// CheckPluginRefs runs the Check of p's type (none: nil) on p's config,
// inside the mutation's transaction tx.
func (cp *ControlPlane) CheckPluginRefs(tx *gorm.DB, p *storage.Plugin) error {
	if f := cp.pluginRefs[p.Type].Check; f != nil {
		return f(tx, p.Config)
	}
	return nil
}

// pluginInternals are the plugin types' compiled internals, by type.
func (cp *ControlPlane) pluginInternals() map[string]compiler.TypeInternals {
	out := make(map[string]compiler.TypeInternals, len(cp.pluginRefs))
	for typ, r := range cp.pluginRefs {
		if r.Internals != nil {
			out[typ] = r.Internals
		}
	}
	return out
}

// Unsupported is a Check error for a plugin this gateway cannot run as
// configured (a rate limit counting in a store it lacks): a 400 naming the
// field on a write, a skipped plugin with the message as its reason on an
// import.
type Unsupported struct{ *schema.FieldError }

// Unwrap gives the field error (the admin API answers it 400).
func (u *Unsupported) Unwrap() error { return u.FieldError }
