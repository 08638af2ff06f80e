package compiler

import (
	"encoding/json"
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddypki"
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
