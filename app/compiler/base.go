package compiler

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddypki"

	"github.com/caddy-gateway/gateway/modules/certevents"
)

// mergePKIApp makes sure Caddy never installs a local CA root into the
// host's trust store (Caddy's skip_install_trust): every CA of the base
// config's pki app, and the default "local" CA that Caddy's internal issuer
// would otherwise create with trust installation on (for a user site on
// localhost or an IP), get install_trust false. A gateway must not change
// the trust of the machine it runs on.
func mergePKIApp(apps map[string]json.RawMessage) error {
	pki := new(caddypki.PKI)
	if raw, ok := apps["pki"]; ok {
		if err := json.Unmarshal(raw, pki); err != nil {
			return fmt.Errorf("reading the base config's pki app: %w", err)
		}
	}
	if pki.CAs == nil {
		pki.CAs = map[string]*caddypki.CA{}
	}
	if _, ok := pki.CAs[caddypki.DefaultCAID]; !ok {
		pki.CAs[caddypki.DefaultCAID] = new(caddypki.CA)
	}
	no := false
	for id, ca := range pki.CAs {
		if ca == nil {
			ca = new(caddypki.CA)
			pki.CAs[id] = ca
		}
		ca.InstallTrust = &no
	}
	raw, err := json.Marshal(pki)
	if err != nil {
		return fmt.Errorf("encoding the pki app: %w", err)
	}
	apps["pki"] = raw
	return nil
}

// adminConfig is the base config's admin section with autosave off: the
// store is the source of truth, and generated configs reference the live
// version's values, which a saved copy would outlive.
func adminConfig(raw json.RawMessage) (json.RawMessage, error) {
	admin := new(caddy.AdminConfig)
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, admin); err != nil {
			return nil, fmt.Errorf("reading the base config's admin section: %w", err)
		}
	}
	if admin.Config == nil {
		admin.Config = new(caddy.ConfigSettings)
	}
	no := false
	admin.Config.Persist = &no
	return json.Marshal(admin)
}

// The parts of a config that Assemble and the features' steps write into
// every compiled config, from the base's and the store's: the top-level
// sections and the apps.
var (
	assembledSections = []string{"admin", "logging", "storage"}
	assembledApps     = []string{"gateway", "tls", "pki", certevents.AppID}
)

// Rebase is the base config after the running config, compiled from base
// (loaded, the compiled config as loaded), was changed through Caddy's
// admin API into running: running's sections and apps, except those
// compiled configs are written into (assembledSections, assembledApps),
// which stay base's: the gateway's own additions cannot be told from the
// user's there. kept names those that running changed (a change that the
// next compiled config replaces).
func Rebase(base, running map[string]json.RawMessage, loaded []byte) (out map[string]json.RawMessage, kept []string, err error) {
	var last map[string]json.RawMessage
	if err := json.Unmarshal(loaded, &last); err != nil {
		return nil, nil, fmt.Errorf("reading the loaded config: %w", err)
	}
	apps := map[string]map[string]json.RawMessage{}
	for name, cfg := range map[string]map[string]json.RawMessage{"base": base, "running": running, "last": last} {
		m := map[string]json.RawMessage{}
		if raw, ok := cfg["apps"]; ok && string(raw) != "null" {
			if err := json.Unmarshal(raw, &m); err != nil {
				return nil, nil, fmt.Errorf("reading the %s config's apps: %w", name, err)
			}
		}
		apps[name] = m
	}
	keep := func(from, to, running, last map[string]json.RawMessage, keys []string, prefix string) {
		for _, k := range keys {
			delete(to, k)
			if v, ok := from[k]; ok {
				to[k] = v
			}
			if !sameJSON(running[k], last[k]) {
				kept = append(kept, prefix+k)
			}
		}
	}
	out = maps.Clone(running)
	newApps := maps.Clone(apps["running"])
	keep(apps["base"], newApps, apps["running"], apps["last"], assembledApps, "apps/")
	keep(base, out, running, last, assembledSections, "")
	delete(out, "apps")
	if len(newApps) > 0 {
		if out["apps"], err = json.Marshal(newApps); err != nil {
			return nil, nil, err
		}
	}
	return out, kept, nil
}

// sameJSON reports whether a and b are the same JSON value (absent and
// null are the same).
func sameJSON(a, b json.RawMessage) bool {
	var va, vb any
	if len(a) > 0 && json.Unmarshal(a, &va) != nil {
		return false
	}
	if len(b) > 0 && json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}
