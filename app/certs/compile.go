package certs

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/modules/caddytls"
	"github.com/mholt/acmez/v3/acme"

	"github.com/caddy-gateway/gateway/app/compiler"
	"github.com/caddy-gateway/gateway/app/controlplane"
	"github.com/caddy-gateway/gateway/internal/configref"
	"github.com/caddy-gateway/gateway/modules/certevents"
	"github.com/caddy-gateway/gateway/modules/dnsproviders/cloudflare"
	"github.com/caddy-gateway/gateway/modules/gwtls"
	"github.com/caddy-gateway/gateway/storage"
)

// Tag tags a certificate loaded from the store in the tls app (issued ACME
// certificates carry no tag: that is how views tell them apart).
func Tag(id int64) string { return "gateway-certificate-" + strconv.FormatInt(id, 10) }

// Compile is the certificates' compile step (a compiler.Step, handed to the
// compiler by the app's feature list), with the bootstrap's ACME settings
// (extra trusted roots, dns-01 resolvers, the Cloudflare API URL): it
// merges the stored certificates into the tls app of the base config (the
// user's own tls app is kept): uploaded pairs are loaded by the
// tls.certificates.gateway loader, tagged with their id; ACME names are
// added to certificates.automate with an automation policy per
// certificate, placed before the user's policies (the first matching policy
// wins). Certificates are then selected by SNI by the HTTPS listener's
// empty connection policy.
//
// Private keys, the Cloudflare token and EAB keys are secrets: they reach
// the tls app's modules by reference (package configref, modules/gwtls):
// uploaded pairs through the loader, EAB through the
// tls.issuance.gateway_acme issuer, the token through the Cloudflare
// provider's api_token_ref.
//
// boot is called at every compile: a `caddy reload` changes the gateway
// options the ACME issuer takes (trusted roots, DNS resolvers, the
// Cloudflare API URL).
func Compile(boot func() controlplane.Bootstrap) compiler.Step {
	return func(apps map[string]json.RawMessage, snap *storage.Snapshot, opt compiler.Options) error {
		b := boot()
		return compileTLS(apps, snap, opt.Version, &b)
	}
}

func compileTLS(apps map[string]json.RawMessage, snap *storage.Snapshot, version int64, boot *controlplane.Bootstrap) error {
	certs := Table.Rows(snap)
	if len(certs) == 0 {
		return nil
	}
	tlsApp := new(caddytls.TLS)
	if raw, ok := apps["tls"]; ok {
		if err := json.Unmarshal(raw, tlsApp); err != nil {
			return fmt.Errorf("reading the base config's tls app: %w", err)
		}
	}
	if tlsApp.CertificatesRaw == nil {
		tlsApp.CertificatesRaw = caddy.ModuleMap{}
	}
	var automate []string
	if raw, ok := tlsApp.CertificatesRaw["automate"]; ok {
		if err := json.Unmarshal(raw, &automate); err != nil {
			return fmt.Errorf("reading the base config's tls certificates.automate: %w", err)
		}
	}
	var pairs []gwtls.Pair
	var policies []*caddytls.AutomationPolicy
	for _, c := range certs {
		if !c.ACME {
			pairs = append(pairs, gwtls.Pair{CertPEM: c.CertPEM, KeyPEM: c.KeyPEM, Tags: []string{Tag(c.ID)}})
			continue
		}
		token := snap.CloudflareToken()
		if c.Challenge == "dns-01" && token == "" {
			continue // no DNS provider credentials: not managed (stays pending)
		}
		automate = append(automate, c.Domains...)
		policies = append(policies, &caddytls.AutomationPolicy{
			SubjectsRaw: c.Domains,
			IssuersRaw:  []json.RawMessage{acmeIssuer(snap, &c, token, version, boot)},
		})
	}
	if len(pairs) > 0 {
		loader := &gwtls.Loader{Ref: configref.Put(version, "certificates", pairs)}
		tlsApp.CertificatesRaw["gateway"] = caddyconfig.JSON(loader, nil)
	}
	if len(automate) > 0 {
		tlsApp.CertificatesRaw["automate"] = caddyconfig.JSON(automate, nil)
	}
	if len(policies) > 0 {
		if tlsApp.Automation == nil {
			tlsApp.Automation = new(caddytls.AutomationConfig)
		}
		tlsApp.Automation.Policies = append(policies, tlsApp.Automation.Policies...)
		// the gateway's certificate event handler, subscribed while the
		// config is provisioned (see certevents.App for why not in the
		// events app's JSON)
		apps[certevents.AppID] = json.RawMessage(`{}`)
	}
	raw, err := json.Marshal(tlsApp)
	if err != nil {
		return fmt.Errorf("encoding the tls app: %w", err)
	}
	apps["tls"] = raw
	return nil
}

// acmeIssuer is the issuer of one ACME certificate: the settings' directory
// and contact, the EAB of that directory by reference, and exactly the
// certificate's challenge enabled.
func acmeIssuer(snap *storage.Snapshot, c *Row, token string, version int64, boot *controlplane.Bootstrap) json.RawMessage {
	s := snap.Settings
	dir := storage.NormalizeACMEDirectory(s.ACMEDirectoryURL)
	iss := &gwtls.ACMEIssuer{ACMEIssuer: caddytls.ACMEIssuer{
		CA:                   dir,
		Email:                s.ACMEEmail,
		TrustedRootsPEMFiles: boot.ACMETrustedRoots,
	}}
	if eab := snap.EABFor(dir); eab != nil {
		iss.ExternalAccountRef = configref.Put(version, "eab/"+dir, &acme.EAB{KeyID: eab.KeyID, MACKey: eab.MACKey})
	}
	ch := new(caddytls.ChallengesConfig)
	switch c.Challenge {
	case "tls-alpn-01":
		ch.HTTP = &caddytls.HTTPChallengeConfig{Disabled: true}
		ch.TLSALPN = &caddytls.TLSALPNChallengeConfig{AlternatePort: storage.ListenPort(s.HTTPSListen)}
	case "dns-01":
		provider := &cloudflare.Provider{
			APITokenRef: configref.Put(version, "cloudflare_token", token),
			BaseURL:     boot.CloudflareAPIURL,
		}
		ch.DNS = &caddytls.DNSChallengeConfig{
			ProviderRaw: caddyconfig.JSONModuleObject(provider, "name", "cloudflare", nil),
		}
		if len(boot.ACMEDNSResolvers) > 0 {
			ch.DNS.Resolvers = boot.ACMEDNSResolvers
			ch.DNS.PropagationTimeout = -1
		}
		ch.HTTP = &caddytls.HTTPChallengeConfig{Disabled: true}
		ch.TLSALPN = &caddytls.TLSALPNChallengeConfig{Disabled: true}
	default: // http-01: answered by the gateway's HTTP listener
		ch.TLSALPN = &caddytls.TLSALPNChallengeConfig{Disabled: true}
		ch.HTTP = &caddytls.HTTPChallengeConfig{AlternatePort: storage.ListenPort(s.HTTPListen)}
	}
	iss.Challenges = ch
	return caddyconfig.JSONModuleObject(iss, "module", "gateway_acme", nil)
}
