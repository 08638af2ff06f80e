package gwtls

import (
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddytls"
	"github.com/caddyserver/certmagic"
	"github.com/mholt/acmez/v3/acme"

	"github.com/caddy-gateway/gateway/internal/configref"
)

func init() {
	caddy.RegisterModule(new(ACMEIssuer))
}

// ACMEIssuer is the issuer tls.issuance.gateway_acme: Caddy's own ACME
// issuer (every field of tls.issuance.acme), whose external account binding
// comes by reference from the gateway (the EAB MAC key is a secret).
type ACMEIssuer struct {
	caddytls.ACMEIssuer

	// ExternalAccountRef references an *acme.EAB compiled by the gateway;
	// it sets external_account.
	ExternalAccountRef string `json:"external_account_ref,omitempty"`

	magic *certmagic.Config
}

// CaddyModule returns the Caddy module information.
func (*ACMEIssuer) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "tls.issuance.gateway_acme",
		New: func() caddy.Module { return new(ACMEIssuer) },
	}
}

// Provision resolves the reference, then provisions Caddy's ACME issuer.
func (iss *ACMEIssuer) Provision(ctx caddy.Context) error {
	if iss.ExternalAccountRef != "" {
		eab, err := configref.Get[*acme.EAB](iss.ExternalAccountRef)
		if err != nil {
			return fmt.Errorf("external_account_ref: %w", err)
		}
		cp := *eab
		iss.ExternalAccount = &cp
	}
	return iss.ACMEIssuer.Provision(ctx)
}

// SetConfig implements caddytls.ConfigSetter: Caddy hands the issuer the
// certmagic config of its automation policy, which the issuer keeps
// (Config: a forced renewal goes through it). The renewed certificate is
// served from the next handshake by the HTTPS listener's Newest.
func (iss *ACMEIssuer) SetConfig(cfg *certmagic.Config) {
	iss.ACMEIssuer.SetConfig(cfg)
	iss.magic = cfg
}

// Config is the certmagic config of the issuer's automation policy (nil
// before Caddy provisioned the policy).
func (iss *ACMEIssuer) Config() *certmagic.Config { return iss.magic }

// Interface guards
var (
	_ caddy.Provisioner                                 = (*ACMEIssuer)(nil)
	_ certmagic.Issuer                                  = (*ACMEIssuer)(nil)
	_ certmagic.PreChecker                              = (*ACMEIssuer)(nil)
	_ certmagic.Revoker                                 = (*ACMEIssuer)(nil)
	_ caddytls.ConfigSetter                             = (*ACMEIssuer)(nil)
	_ interface{ GetACMEIssuer() *caddytls.ACMEIssuer } = (*ACMEIssuer)(nil)
)
