// Package certs is the certificates resource of the admin API: uploaded
// (manual) certificate chains with their keys, and ACME-managed names.
// Both compile into Caddy's tls app (Compile, the package's compile step,
// which the app hands to the compiler): uploaded pairs through the
// tls.certificates.gateway loader, ACME names into certificates.automate
// with an automation policy; the HTTPS listener picks them by SNI. Issued ACME
// certificates live in Caddy's storage (certmagic); their status comes
// from Caddy's certificate events (events.go).
package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"time"

	"github.com/caddyserver/certmagic"
	"gorm.io/gorm"

	"github.com/caddy-gateway/gateway/app/api"
	"github.com/caddy-gateway/gateway/schema"
)

const description = "Manual: cert (PEM chain, leaf first; the leaf's key RSA of 1024..8192 bits, ECDSA P-256, P-384 or P-521, or Ed25519: what TLS can serve) and key (PEM private key, write-only, must match the leaf); " +
	"domains are the leaf's SANs; a valid certificate is active, one past not_after expired. " +
	"ACME: acme true, domains (1..100 public DNS names, no IP addresses; wildcards only with challenge dns-01), challenge (http-01 default, tls-alpn-01, dns-01); " +
	"the certificate is pending until Caddy's automation has issued it (from settings.acme_directory_url with settings.acme_email), then active; " +
	"status, last_error, issuer, not_before and not_after come from Caddy's own certificate events: an order that fails makes a pending certificate failed, " +
	"with the CA's or the challenge's reason in last_error (Caddy keeps retrying; the next success makes it active and clears last_error), " +
	"and a failed renewal of an issued certificate keeps it active (it is still served) with the reason in last_error. " +
	"In a cluster the node that obtains the certificate records it, and every node serves it from the shared storage. " +
	"HTTP-01 challenges are answered by the gateway's HTTP listener (the CA must reach it on port 80). " +
	"Private keys are never returned."

// Certificate is the one declaration of a certificate in the admin API:
// the body of POST /api/v1/certificates (acme, domains, challenge, cert and
// key; the read-only fields are ignored), its answers (View: never
// challenge, cert or key), and an item of export documents (Exported: the
// ACME challenge or the manual chain, the key only with secrets), which an
// import takes back (FromDocument, then the rules of a creation).
type Certificate struct {
	ID                int64      `json:"id" schema:"readonly"`
	ACME              bool       `json:"acme" doc:"true for an ACME-managed certificate; default false (manual upload)."`
	Domains           []string   `json:"domains" doc:"ACME, required on input: 1..100 public DNS names; wildcards (*.example.com) only with challenge dns-01. IP addresses and local names (localhost, *.local, *.internal, *.home.arpa) are 400: no public CA issues for them; so is a name another ACME certificate already has. Manual: the leaf's SANs, from the chain (400 on input; an import ignores them)."`
	Challenge         *string    `json:"challenge,omitempty" schema:"enum=http-01|tls-alpn-01|dns-01" doc:"ACME only; default http-01. Not in answers (export documents carry it)."`
	Cert              *string    `json:"cert,omitempty" schema:"text,minLength=1,maxLength=1048576" doc:"Manual only, required: the PEM certificate chain, leaf first (at most 1 MiB and 10 certificates). Not in answers (export documents carry it)."`
	Key               *string    `json:"key,omitempty" schema:"text,minLength=1,writeonly" doc:"Manual only, required: the PEM private key of the leaf; never returned (export documents carry it only with include_secrets; without it an import skips the certificate)."`
	Status            string     `json:"status" schema:"readonly,enum=pending|active|failed|expired" doc:"pending: an ACME certificate not issued yet; active: issued (ACME) or uploaded (manual; one uploaded ahead of its not_before too, which not_before shows), until not_after; failed: an ACME order failed (last_error); expired: past not_after."`
	Issuer            *string    `json:"issuer" schema:"readonly" doc:"The issuer's common name (or full name); null while pending."`
	NotBefore         *time.Time `json:"not_before" schema:"readonly" doc:"null while pending."`
	NotAfter          *time.Time `json:"not_after" schema:"readonly" doc:"null while pending."`
	FingerprintSHA256 *string    `json:"fingerprint_sha256" schema:"readonly" doc:"SHA-256 of the leaf's DER, hex; null while pending."`
	LastError         *string    `json:"last_error" schema:"readonly"`
	CreatedAt         time.Time  `json:"created_at" schema:"readonly"`
	UpdatedAt         time.Time  `json:"updated_at" schema:"readonly"`
}

// acmeDomains are the string rules of an ACME certificate's domains.
type acmeDomains struct {
	Domains []string `json:"domains" schema:"host,maxItems=100"`
}

var dnsName = regexp.MustCompile(`^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Validate implements schema.Validator: the rules of a creation.
func (in *Certificate) Validate() error {
	if !in.ACME {
		if in.Domains != nil {
			return schema.Errorf("domains", "applies to ACME certificates only (a manual certificate's names come from its leaf)")
		}
		if in.Challenge != nil {
			return schema.Errorf("challenge", "applies to ACME certificates only")
		}
		if in.Cert == nil {
			return schema.Errorf("cert", "is required")
		}
		if in.Key == nil {
			return schema.Errorf("key", "is required")
		}
		return nil
	}
	if in.Cert != nil {
		return schema.Errorf("cert", "does not apply to ACME certificates")
	}
	if in.Key != nil {
		return schema.Errorf("key", "does not apply to ACME certificates")
	}
	if in.Challenge == nil {
		ch := "http-01"
		in.Challenge = &ch
	}
	if len(in.Domains) == 0 {
		return schema.Errorf("domains", "needs 1..100 DNS names")
	}
	// The host rules hold for ACME names only: on the field they would also
	// hold for a manual certificate's names in export documents, which come
	// from its leaf, and refuse the import of every backup holding one.
	if err := schema.Check(&acmeDomains{Domains: in.Domains}); err != nil {
		return err
	}
	seen := map[string]bool{}
	out := make([]string, 0, len(in.Domains))
	for i, d := range in.Domains {
		d = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(d), "."))
		field := fmt.Sprintf("domains[%d]", i)
		if net.ParseIP(strings.Trim(d, "[]")) != nil {
			return schema.Errorf(field, "%q is an IP address; ACME certificates are for DNS names", in.Domains[i])
		}
		if len(d) > 253 || !dnsName.MatchString(d) || !strings.Contains(strings.TrimPrefix(d, "*."), ".") || allDigits(d[strings.LastIndexByte(d, '.')+1:]) {
			return schema.Errorf(field, "%q is not a DNS name", in.Domains[i])
		}
		// Names no public CA issues for (localhost, *.local, *.internal,
		// *.home.arpa) would make Caddy fall back to its internal CA.
		if !certmagic.SubjectQualifiesForPublicCert(d) {
			return schema.Errorf(field, "%q cannot get a publicly trusted certificate (a local or internal name)", in.Domains[i])
		}
		if strings.HasPrefix(d, "*.") && *in.Challenge != "dns-01" {
			return schema.Errorf(field, "wildcard names need challenge dns-01")
		}
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	in.Domains = out
	return nil
}

// Exported is a row as an export document shows it: its view, with the
// ACME challenge or the manual chain, and the private key when secrets is
// set.
func Exported(row *Row, now time.Time, secrets bool) Certificate {
	v := View(row, now)
	if row.ACME {
		ch := row.Challenge
		v.Challenge = &ch
		return v
	}
	cert := row.CertPEM
	v.Cert = &cert
	if secrets {
		key := row.KeyPEM
		v.Key = &key
	}
	return v
}

// FromDocument makes c, an item of an export document, a creation input:
// a manual certificate's names come from its chain again.
func (c *Certificate) FromDocument() {
	if !c.ACME {
		c.Domains = nil
	}
}

// RenewResult is the answer of POST /api/v1/certificates/{id}/renew.
type RenewResult struct {
	Queued bool `json:"queued"`
}

// Endpoints are the certificate and ACME endpoints.
func Endpoints() []*api.Endpoint {
	return append(certificateEndpoints(), acmeEndpoints()...)
}

func certificateEndpoints() []*api.Endpoint {
	return []*api.Endpoint{
		{Method: "GET", Path: "/api/v1/certificates", Role: api.RoleViewer, Tag: "certificates",
			Summary: "List certificates (without private keys)", Response: Certificate{}, ResponseList: true, Handle: list},
		{Method: "POST", Path: "/api/v1/certificates", Role: api.RoleEditor, Tag: "certificates",
			Summary: "Upload a certificate or request an ACME-managed one", Description: description,
			Body: Certificate{}, Response: Certificate{}, Statuses: []int{400}, Handle: create},
		{Method: "DELETE", Path: "/api/v1/certificates/{id}", Role: api.RoleEditor, Tag: "certificates",
			Summary: "Delete a certificate", Response: api.Deleted{}, Statuses: []int{404}, Handle: resource.Remove},
		{Method: "POST", Path: "/api/v1/certificates/{id}/renew", Role: api.RoleEditor, Tag: "certificates",
			Summary: "Renew an ACME-managed certificate now",
			Description: "Forces a renewal of every name of the certificate now, even when it is not due (a name not yet issued is ordered): " +
				"the renewal runs in the background (queued true), with Caddy's retries for up to 10 minutes; " +
				"the renewed certificate is stored, served by this node from the next TLS handshake " +
				"(other nodes of a cluster keep serving the previous, still valid, certificate until they load the renewed one from the shared storage at their next certificate maintenance), " +
				"and its not_before, not_after and fingerprint_sha256 show on the certificate once issued; a failure shows in last_error. " +
				"400 for a manual certificate (upload a new one instead) or a certificate the running configuration does not manage (dns-01 without the Cloudflare token).",
			Response: RenewResult{}, Statuses: []int{400, 404}, Handle: renew},
	}
}

var resource = api.Resource[Row]{Kind: "certificate"}

func list(c *api.Call) (any, error) {
	var rows []Row
	if err := c.CP.Store().DB.WithContext(c.Ctx()).Order("id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("listing certificates: %w", err)
	}
	out := make([]Certificate, 0, len(rows))
	for i := range rows {
		out = append(out, View(&rows[i], time.Now()))
	}
	return out, nil
}

func create(c *api.Call) (any, error) {
	in := new(Certificate)
	if err := c.Decode(in); err != nil {
		return nil, err
	}
	row, err := in.Row()
	if err != nil {
		return nil, err
	}
	if in.ACME && *in.Challenge == "dns-01" {
		if tok, err := getToken(c); err != nil {
			return nil, err
		} else if !tok.(Configured).Configured {
			return nil, schema.Errorf("challenge", "dns-01 uses the Cloudflare API token: set it first (PUT /api/v1/acme/cloudflare-token)")
		}
	}
	err = c.CP.Mutate(c.Ctx(), func(tx *gorm.DB) error {
		if err := DomainsFree(tx, row); err != nil {
			return err
		}
		return tx.Create(row).Error
	})
	if err != nil {
		return nil, err
	}
	if row.ACME {
		replay(c.CP, row.Domains)
	}
	return View(row, time.Now()), nil
}

// DomainsFree refuses an ACME row naming a domain another ACME
// certificate in tx already names (400 naming domains): Caddy takes one
// automation policy per name and rejects the whole configuration
// otherwise, with an error about policies; and a dns-01 certificate, left
// out of the configuration while no Cloudflare token is set, would let a
// duplicate in, and then make setting the token fail.
func DomainsFree(tx *gorm.DB, row *Row) error {
	if !row.ACME {
		return nil
	}
	var rows []Row
	if err := tx.Select("id", "domains").Where("acme = ?", true).Order("id").Find(&rows).Error; err != nil {
		return fmt.Errorf("reading ACME certificates: %w", err)
	}
	owner := map[string]int64{}
	for _, r := range rows {
		for _, d := range r.Domains {
			owner[d] = r.ID
		}
	}
	for _, d := range row.Domains {
		if id, ok := owner[d]; ok {
			return schema.Errorf("domains", "%q is already managed by ACME certificate %d (a name has one ACME certificate; renew or delete that one)", d, id)
		}
	}
	return nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// Row builds the stored certificate from a validated input: a manual one is
// parsed (chain, key matching the leaf) and described by its leaf.
func (in *Certificate) Row() (*Row, error) {
	if in.ACME {
		return &Row{ACME: true, Domains: in.Domains, Challenge: *in.Challenge, Status: "pending"}, nil
	}
	leaf, err := parsePair(*in.Cert, *in.Key)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(leaf.Raw)
	nb, na := leaf.NotBefore.UTC(), leaf.NotAfter.UTC()
	return &Row{
		Domains: leafNames(leaf), CertPEM: *in.Cert, KeyPEM: *in.Key, Status: "active",
		Issuer: issuerName(leaf), NotBefore: &nb, NotAfter: &na, Fingerprint: hex.EncodeToString(sum[:]),
	}, nil
}

// maxChain is the most certificates a chain may hold (a leaf and its
// intermediates; real chains have 2 to 4).
const maxChain = 10

// maxLeafNames is the most SANs a leaf may hold: its names are the
// certificate's domains, which an export document lists and an import
// decodes under the declaration's default item cap (multi-domain
// certificates of public CAs hold at most a few hundred).
const maxLeafNames = schema.DefaultMaxItems

// parsePair parses the chain and the key and checks that the key belongs to
// the leaf (400 naming the field otherwise).
func parsePair(certPEM, keyPEM string) (*x509.Certificate, error) {
	var chain []*x509.Certificate
	rest := []byte(certPEM)
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		if len(chain) == maxChain {
			return nil, schema.Errorf("cert", "must hold at most %d certificates", maxChain)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, schema.Errorf("cert", "certificate %d of the chain cannot be parsed: %v", len(chain)+1, err)
		}
		chain = append(chain, c)
	}
	if len(chain) == 0 {
		return nil, schema.Errorf("cert", "must be a PEM certificate chain (no CERTIFICATE block found)")
	}
	leaf := chain[0]
	names := leafNames(leaf)
	if len(names) == 0 {
		return nil, schema.Errorf("cert", "the leaf certificate has no DNS names or IP addresses")
	}
	if len(names) > maxLeafNames {
		return nil, schema.Errorf("cert", "the leaf certificate holds %d names (DNS names and IP addresses); at most %d", len(names), maxLeafNames)
	}
	for _, n := range names {
		// x509 takes any ASCII in a DNS name; the names are the
		// certificate's domains, one-line strings in every document.
		if len(n) > 253 || strings.ContainsFunc(n, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return nil, schema.Errorf("cert", "the leaf certificate's name %q is not a DNS name (control characters or longer than 253 characters)", n)
		}
	}
	if err := usableKey(leaf); err != nil {
		return nil, err
	}
	kb, _ := pem.Decode([]byte(keyPEM))
	if kb == nil || !strings.Contains(kb.Type, "PRIVATE KEY") {
		return nil, schema.Errorf("key", "must be a PEM private key")
	}
	if _, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM)); err != nil {
		if _, perr := parseKey(kb.Bytes); perr != nil {
			return nil, schema.Errorf("key", "cannot be parsed: %v", perr)
		}
		return nil, schema.Errorf("key", "does not match the leaf certificate: %v", err)
	}
	return leaf, nil
}

// usableKey refuses a leaf whose public key the HTTPS listener cannot
// serve: crypto/tls signs with no RSA key under 1024 bits (so every
// handshake for its names failed while the certificate showed active),
// TLS has no ECDSA curve but P-256, P-384 and P-521 (x509 also parses
// P-224), and clients refuse RSA keys over 8192 bits (Go's crypto/tls
// among them), whose every handshake would also cost the server a
// private-key operation many times that of a 2048-bit key.
func usableKey(leaf *x509.Certificate) error {
	switch k := leaf.PublicKey.(type) {
	case *rsa.PublicKey:
		if n := k.N.BitLen(); n < 1024 || n > 8192 {
			return schema.Errorf("cert", "the leaf certificate's RSA key has %d bits; TLS needs 1024 to 8192 (2048 or more recommended)", n)
		}
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256(), elliptic.P384(), elliptic.P521():
		default:
			return schema.Errorf("cert", "the leaf certificate's ECDSA key uses curve %s; TLS supports P-256, P-384 and P-521", k.Curve.Params().Name)
		}
	case ed25519.PublicKey:
	default:
		return schema.Errorf("cert", "the leaf certificate's key type %T is not supported (RSA, ECDSA or Ed25519)", leaf.PublicKey)
	}
	return nil
}

func parseKey(der []byte) (crypto.PrivateKey, error) {
	if k, err := x509.ParsePKCS8PrivateKey(der); err == nil {
		switch k.(type) {
		case *rsa.PrivateKey, *ecdsa.PrivateKey, ed25519.PrivateKey:
			return k, nil
		}
		return nil, errors.New("unsupported key type")
	}
	if k, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return k, nil
	}
	if k, err := x509.ParseECPrivateKey(der); err == nil {
		return k, nil
	}
	return nil, errors.New("not a PKCS#8, PKCS#1 or EC private key")
}

// leafNames are the leaf's SANs (DNS names, then IP addresses), lowercased.
func leafNames(leaf *x509.Certificate) []string {
	out := make([]string, 0, len(leaf.DNSNames)+len(leaf.IPAddresses))
	for _, n := range leaf.DNSNames {
		out = append(out, strings.ToLower(n))
	}
	for _, ip := range leaf.IPAddresses {
		out = append(out, ip.String())
	}
	return out
}

func issuerName(c *x509.Certificate) string {
	if c.Issuer.CommonName != "" {
		return c.Issuer.CommonName
	}
	return c.Issuer.String()
}

// View is a row as answers show it at time now: a manual certificate is
// active until not_after and expired after (one uploaded ahead of its
// not_before is active too: `pending` answers carry null validity, and
// this one's not_before says when clients start accepting it); an ACME
// certificate
// shows what Caddy's certificate events recorded in its row (events.go):
// pending until issued, failed with last_error when an order failed,
// active once issued (expired past not_after).
func View(row *Row, now time.Time) Certificate {
	v := Certificate{
		ID: row.ID, ACME: row.ACME, Domains: row.Domains, Status: row.Status,
		NotBefore: row.NotBefore, NotAfter: row.NotAfter, LastError: row.LastError,
		CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt,
	}
	if v.Domains == nil {
		v.Domains = []string{}
	}
	if row.Issuer != "" {
		iss := row.Issuer
		v.Issuer = &iss
	}
	if row.Fingerprint != "" {
		fp := row.Fingerprint
		v.FingerprintSHA256 = &fp
	}
	if row.ACME && v.Status != "active" {
		return v // pending or failed
	}
	v.Status = "active"
	if row.NotAfter != nil && now.After(*row.NotAfter) {
		v.Status = "expired"
	}
	return v
}

func renew(c *api.Call) (any, error) {
	id, err := c.ID("id")
	if err != nil {
		return nil, err
	}
	row, err := resource.Load(c.CP.Store().DB.WithContext(c.Ctx()), id)
	if err != nil {
		return nil, err
	}
	if !row.ACME {
		return nil, api.BadRequest("certificate " + fmt.Sprint(id) + " is a manual certificate: upload a new one to replace it")
	}
	if err := forceRenewal(c.CP, row.Domains); err != nil {
		return nil, api.BadRequest(fmt.Sprintf("certificate %d: %v", id, err))
	}
	return RenewResult{Queued: true}, nil
}

// Matching reports whether an issued certificate in tx matches domain
// (docs/tls.md): active (manual until not_after, ACME issued)
// and one of its names equals domain or is a wildcard covering it.
func Matching(tx *gorm.DB, domain string) (bool, error) {
	var rows []Row
	if err := tx.Order("id").Find(&rows).Error; err != nil {
		return false, err
	}
	domain = strings.ToLower(strings.TrimSuffix(domain, "."))
	now := time.Now()
	for i := range rows {
		if View(&rows[i], now).Status != "active" {
			continue
		}
		for _, n := range rows[i].Domains {
			if NameMatches(n, domain) {
				return true, nil
			}
		}
	}
	return false, nil
}

// NameMatches: exact (case-insensitive), or a *.parent wildcard covering
// exactly one label.
func NameMatches(name, domain string) bool {
	name, domain = strings.ToLower(name), strings.ToLower(domain)
	if name == domain {
		return true
	}
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		label, parent, found := strings.Cut(domain, ".")
		return found && label != "" && parent == rest
	}
	return false
}
