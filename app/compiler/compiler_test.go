package compiler_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/app/certs"
	"github.com/caddy-gateway/gateway/app/compiler"
	"github.com/caddy-gateway/gateway/app/controlplane"
	"github.com/caddy-gateway/gateway/app/wasmapi"
	"github.com/caddy-gateway/gateway/internal/configref"
	"github.com/caddy-gateway/gateway/internal/consumers"
	"github.com/caddy-gateway/gateway/internal/textdiff"
	"github.com/caddy-gateway/gateway/modules/router"
	"github.com/caddy-gateway/gateway/storage"

	// The plugin types the fixtures configure.
	_ "github.com/caddy-gateway/gateway/modules/plugins/auth"
	_ "github.com/caddy-gateway/gateway/modules/plugins/httplog"
	_ "github.com/caddy-gateway/gateway/modules/plugins/ratelimit"
	_ "github.com/caddy-gateway/gateway/modules/plugins/traffic"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the compiler's output")

// epoch stamps every row of the fixtures, so that compiled instance ids
// are stable.
var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

// store is a fixture: a snapshot plus the base config it compiles into.
type store struct {
	snap *storage.Snapshot
	base map[string]json.RawMessage
	opt  compiler.Options
}

func baseSnapshot() *storage.Snapshot {
	s := &storage.Snapshot{
		Settings: storage.Settings{ID: 1, HTTPListen: ":8080", HTTPSListen: ":8443", TrustedProxies: []string{}, ACMEDirectoryURL: "letsencrypt"},
		Extra:    map[string]any{},
	}
	certs.Table.Put(s, nil) // the gateway's store has the tables
	wasmapi.Table.Put(s, nil)
	return s
}

func service(id int64, name string) storage.Service {
	s := storage.Service{ID: id, Name: name, CreatedAt: epoch, UpdatedAt: epoch}
	s.SetDefaults()
	return s
}

func target(id, serviceID int64, host string, port int) storage.Target {
	t := storage.Target{ID: id, ServiceID: serviceID, Host: host, Port: port, CreatedAt: epoch, UpdatedAt: epoch}
	t.SetDefaults()
	return t
}

func route(id, serviceID int64, name string) storage.Route {
	r := storage.Route{ID: id, ServiceID: serviceID, Name: name, CreatedAt: epoch, UpdatedAt: epoch}
	r.SetDefaults()
	return r
}

func plugin(id int64, typ, scope string, svc, rt *int64, config string) storage.Plugin {
	return storage.Plugin{ID: id, Type: typ, Scope: scope, ServiceID: svc, RouteID: rt, Enabled: true,
		Config: json.RawMessage(config), CreatedAt: epoch, UpdatedAt: epoch}
}

// fixtures are representative stores, one golden file each.
func fixtures() map[string]store {
	out := map[string]store{}

	// One service, one target, one route: the smallest useful config.
	{
		s := baseSnapshot()
		s.Services = []storage.Service{service(1, "api")}
		s.Targets = []storage.Target{target(1, 1, "127.0.0.1", 9001)}
		r := route(1, 1, "all")
		r.Hosts, r.Paths = []string{"api.example.com"}, []string{"/"}
		s.Routes = []storage.Route{r}
		out["bare_route"] = store{snap: s}
	}

	// Plugins at the three scopes: a route plugin shadows the service's
	// and the global instance of its type; a disabled plugin neither
	// applies nor shadows; ordering overrides the type's default; a route
	// of another service gets only the global chain; disabled routes are
	// not compiled; consumers and credentials reach the auth plugins, and
	// the plugin configs (an http-log plugin's credentials and headers
	// among them) their handlers, by reference.
	{
		s := baseSnapshot()
		s.Services = []storage.Service{service(1, "a"), service(2, "b")}
		s.Targets = []storage.Target{target(1, 1, "127.0.0.1", 9001), target(2, 2, "127.0.0.1", 9002)}
		r1, r2, r3, r4 := route(1, 1, "keyed"), route(2, 1, "open"), route(3, 2, "other"), route(4, 2, "off")
		r1.Paths = []string{"/keyed"}
		r1.Methods = []string{"GET", "POST"}
		r1.Headers = map[string]string{"X-Tenant": "*"}
		r1.StripPath = true
		r2.Paths = []string{"/open", "~/v[0-9]+/open"}
		r2.Priority = 5
		r3.Hosts = []string{"*.example.org"}
		r3.PreserveHost = true
		r3.Splits = []storage.RouteSplit{{ServiceID: 1, Weight: 1}, {ServiceID: 2, Weight: 3}}
		r4.Enabled = false
		s.Routes = []storage.Route{r1, r2, r3, r4}
		one, two, rid := int64(1), int64(2), int64(1)
		s.Plugins = []storage.Plugin{
			plugin(1, "request-id", "global", nil, nil, `{}`),
			plugin(2, "rate-limit", "global", nil, nil, `{"limit":100,"window_s":60}`),
			plugin(3, "rate-limit", "service", &one, nil, `{"limit":10,"window_s":1}`),
			plugin(4, "rate-limit", "route", nil, &rid, `{"limit":1,"window_s":1}`),
			plugin(5, "key-auth", "route", nil, &rid, `{}`),
			plugin(6, "cors", "service", &two, nil, `{"origins":["https://app.example.org"]}`),
			plugin(8, "http-log", "global", nil, nil, `{"endpoint":"http://log:log-pass@127.0.0.1:9/","headers":{"Authorization":"Bearer log-token"}}`),
		}
		s.Plugins[0].Ordering = ptr(int32(1))
		disabled := plugin(7, "request-termination", "global", nil, nil, `{"status_code":503}`)
		disabled.Enabled = false
		s.Plugins = append(s.Plugins, disabled)
		s.Consumers = []storage.Consumer{
			{ID: 1, Username: "alice", CustomID: ptr("A-1"), Groups: []string{"admins"}, CreatedAt: epoch, UpdatedAt: epoch},
			{ID: 2, Username: "bob", Groups: []string{}, CreatedAt: epoch, UpdatedAt: epoch},
		}
		s.Credentials = []storage.Credential{
			{ID: 1, ConsumerID: 1, Type: "key-auth", Key: ptr("alice-key"), CreatedAt: epoch},
			{ID: 2, ConsumerID: 2, Type: "basic-auth", Username: ptr("bob"), PasswordHash: "$2a$10$hash", CreatedAt: epoch},
			{ID: 3, ConsumerID: 2, Type: "jwt", Key: ptr("bob-iss"), Algorithm: ptr("HS256"), Secret: "bob-secret", CreatedAt: epoch},
		}
		out["plugins_three_scopes"] = store{snap: s}
	}

	// Health checks and balancing: HTTP and TCP checks, an https service
	// with SNI, weighted targets (a disabled one and a weight-0 one take no
	// traffic but are still checked), timeouts and retries.
	{
		s := baseSnapshot()
		a, b, c := service(1, "http-checked"), service(2, "tls-weighted"), service(3, "unrouted")
		a.HealthPath = ptr("/healthz")
		a.LBAlgorithm = "consistent"
		a.Retries = 0
		b.Protocol = "https"
		b.TLSSNI = ptr("backend.internal")
		b.LBAlgorithm = "weighted"
		b.ConnectTimeoutMS, b.ReadTimeoutMS, b.WriteTimeoutMS, b.Retries = 250, 0, 1500, 3
		s.Services = []storage.Service{a, b, c}
		t3, t4, t5 := target(3, 2, "10.0.0.2", 443), target(4, 2, "10.0.0.3", 443), target(5, 2, "10.0.0.4", 443)
		t3.Weight, t4.Weight = 3, 0
		t5.Enabled = false
		s.Targets = []storage.Target{target(1, 1, "127.0.0.1", 9001), target(2, 1, "127.0.0.1", 9002), t3, t4, t5, target(6, 3, "127.0.0.1", 9009)}
		r1, r2 := route(1, 1, "a"), route(2, 2, "b")
		r1.Paths, r2.Paths = []string{"/a"}, []string{"/b"}
		s.Routes = []storage.Route{r1, r2}
		out["health_checks"] = store{snap: s}
	}

	// TCP stream routes: enabled ones with their service's live targets
	// and balancing; a disabled one is not compiled.
	{
		s := baseSnapshot()
		svc := service(1, "db")
		svc.LBAlgorithm = "random"
		s.Services = []storage.Service{svc}
		s.Targets = []storage.Target{target(1, 1, "127.0.0.1", 5432), target(2, 1, "127.0.0.1", 5433)}
		s.StreamRoutes = []storage.StreamRoute{
			{ID: 1, Name: "pg", ListenAddr: "127.0.0.1:15432", ServiceID: 1, Enabled: true, CreatedAt: epoch, UpdatedAt: epoch},
			{ID: 2, Name: "off", ListenAddr: ":15433", ServiceID: 1, Enabled: false, CreatedAt: epoch, UpdatedAt: epoch},
		}
		out["streams"] = store{snap: s}
	}

	// Certificates: an uploaded pair (by reference), ACME over each
	// challenge with EAB, dns-01 without a Cloudflare token (left
	// pending), merged before the base config's own tls policies; the
	// base pki CA keeps its settings.
	{
		s := baseSnapshot()
		s.Settings.ACMEEmail = "ops@example.com"
		s.Settings.ACMEDirectoryURL = "https://acme.example.net/directory/"
		certs.Table.Put(s, []certs.Row{
			{ID: 1, Domains: []string{"manual.example.com"}, CertPEM: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", KeyPEM: "-----BEGIN PRIVATE KEY-----\nsecret\n-----END PRIVATE KEY-----\n"},
			{ID: 2, ACME: true, Domains: []string{"a.example.com", "www.a.example.com"}, Challenge: "http-01"},
			{ID: 3, ACME: true, Domains: []string{"b.example.com"}, Challenge: "tls-alpn-01"},
			{ID: 4, ACME: true, Domains: []string{"*.c.example.com"}, Challenge: "dns-01"},
		})
		s.Extra[storage.CloudflareTokenKey] = "cf-token"
		s.Extra[storage.ACMEEABKey] = []storage.ACMEEAB{{ID: 1, DirectoryURL: "https://acme.example.net/directory", KeyID: "kid-1", MACKey: "bWFj"}}
		base := map[string]json.RawMessage{
			"apps": json.RawMessage(`{"tls":{"certificates":{"automate":["user.example.com"]},"automation":{"policies":[{"subjects":["user.example.com"],"issuers":[{"module":"internal"}]}]}},` +
				`"pki":{"certificate_authorities":{"mine":{"name":"Mine","install_trust":true}}}}`),
		}
		boot := controlplane.Bootstrap{
			ACMETrustedRoots: []string{"/etc/gateway/test-ca.pem"},
			ACMEDNSResolvers: []string{"127.0.0.1:5353"},
			CloudflareAPIURL: "http://127.0.0.1:9999/client/v4",
		}
		out["certificates_acme"] = store{snap: s, base: base, opt: compiler.Options{Steps: []compiler.Step{certs.Compile(func() controlplane.Bootstrap { return boot })}}}
		s2 := baseSnapshot()
		certs.Table.Put(s2, []certs.Row{{ID: 5, ACME: true, Domains: []string{"d.example.com"}, Challenge: "dns-01"}})
		out["certificates_dns_without_token"] = store{snap: s2}
	}

	// Settings: HTTPS on, other listeners, trusted proxies (the router's
	// client IP), the redirect port; the base config's admin section and
	// user apps are kept, with autosave off.
	{
		s := baseSnapshot()
		s.Settings.HTTPListen, s.Settings.HTTPSListen, s.Settings.HTTPSEnabled = "127.0.0.1:80", "127.0.0.1:443", true
		s.Settings.TrustedProxies = []string{"10.0.0.0/8", "192.0.2.1"}
		s.Services = []storage.Service{service(1, "api")}
		s.Targets = []storage.Target{target(1, 1, "127.0.0.1", 9001)}
		r := route(1, 1, "all")
		s.Routes = []storage.Route{r}
		base := map[string]json.RawMessage{
			"admin":   json.RawMessage(`{"listen":"127.0.0.1:2019","config":{"persist":true}}`),
			"logging": json.RawMessage(`{"logs":{"default":{"level":"WARN"}}}`),
			"apps":    json.RawMessage(`{"http":{"servers":{"site":{"listen":[":9000"],"routes":[{"handle":[{"handler":"static_response","body":"hi"}]}]}}}}`),
		}
		out["settings"] = store{snap: s, base: base}
	}
	return out
}

// TestGolden compiles every fixture and compares the config, and the
// values it hands by reference, with testdata/<name>.golden.
func TestGolden(t *testing.T) {
	for name, fx := range fixtures() {
		t.Run(name, func(t *testing.T) {
			got := compileFixture(t, fx)
			path := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./app/compiler -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("compiled config differs from %s (go test ./app/compiler -update rewrites it; review the diff):\n%s", path, textdiff.Lines(string(want), string(got), 20))
			}
		})
	}
}

// steps are the features' compile steps, as the app hands them to the
// control plane (app/features.go), for a fixture that sets none.
var steps = []compiler.Step{certs.Compile(func() controlplane.Bootstrap { return controlplane.Bootstrap{} })}

// withSteps completes a fixture's options: the version, the time, its base
// config and the app's compile steps.
func withSteps(fx store, version int64) compiler.Options {
	opt := fx.opt
	opt.Version, opt.Now, opt.Base = version, epoch, fx.base
	if opt.Steps == nil {
		opt.Steps = steps
	}
	return opt
}

// goldenVersion is the config version every fixture is compiled as.
const goldenVersion = 7

// compileFixture compiles a fixture into its golden form: the config, and
// every value referenced from it, indented.
func compileFixture(t *testing.T, fx store) []byte {
	t.Helper()
	version := int64(goldenVersion)
	defer configref.Drop(version)
	opt := withSteps(fx, version)
	opt.Bootstrap = json.RawMessage(`{"admin_listen":"127.0.0.1:9080","database":"sqlite","dsn":"gateway.db"}`)
	out, err := compiler.Config(fx.snap, opt)
	if err != nil {
		t.Fatal(err)
	}
	cfg := out.Config
	// Decoded and indented again, so that the golden file reads as one
	// document.
	var doc any
	dec := json.NewDecoder(bytes.NewReader(cfg))
	dec.UseNumber() // 64-bit instance ids stay exact
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	refs := map[string]any{}
	for _, n := range configref.Names(version) {
		v, _ := configref.Lookup(strings.Join([]string{itoa(version), n}, "/"))
		if tbl, ok := v.(*router.Table); ok {
			v = tbl.Routes()
		}
		if tbl, ok := v.(*consumers.Table); ok {
			// The table's lookups are private; show what it serves.
			var list []*consumers.Consumer
			for _, c := range fx.snap.Consumers {
				list = append(list, tbl.ByID(c.ID))
			}
			v = list
		}
		refs[n] = v
	}
	golden, err := json.MarshalIndent(map[string]any{"config": doc, "refs": refs}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	// References name the version; the golden files do not.
	golden = bytes.ReplaceAll(golden, []byte(`"`+itoa(version)+`/`), []byte(`"V/`))
	return append(golden, '\n')
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// Secrets reach their modules by reference only: nothing of them is in the
// config Caddy's admin endpoint serves.
func TestSecretsStayOutOfTheConfig(t *testing.T) {
	secrets := []string{"alice-key", "$2a$10$hash", "bob-secret", "cf-token", "bWFj", "PRIVATE KEY", "log-pass", "log-token"}
	for name, fx := range fixtures() {
		opt := withSteps(fx, goldenVersion)
		out, err := compiler.Config(fx.snap, opt)
		configref.Drop(goldenVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range secrets {
			if bytes.Contains(out.Config, []byte(s)) {
				t.Errorf("%s: the config contains %q", name, s)
			}
		}
	}
}

// The certificates' step reads the gateway options at every compile, not
// once when the app installs it: a `caddy reload` that changes the ACME
// DNS resolvers (or trusted roots, or the Cloudflare API URL) reaches the
// next compiled config.
func TestCertificatesStepReadsTheCurrentOptions(t *testing.T) {
	fx := fixtures()["certificates_acme"]
	boot := controlplane.Bootstrap{ACMEDNSResolvers: []string{"127.0.0.1:5353"}}
	opt := withSteps(fx, goldenVersion)
	opt.Steps = []compiler.Step{certs.Compile(func() controlplane.Bootstrap { return boot })}
	for _, resolver := range []string{"127.0.0.1:5353", "127.0.0.1:5454"} {
		boot.ACMEDNSResolvers = []string{resolver}
		out, err := compiler.Config(fx.snap, opt)
		configref.Drop(goldenVersion)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(out.Config, []byte(`"resolvers":["`+resolver+`"]`)) {
			t.Errorf("resolver %s is not in the compiled config", resolver)
		}
	}
}

// A compile that updates the live table with the snapshot's route changes
// produces the same config and routing table as a compile from scratch.
func TestIncrementalCompileEqualsFull(t *testing.T) {
	fx := fixtures()["plugins_three_scopes"]
	first := *fx.snap
	opt := compiler.Options{Version: goldenVersion, Now: epoch}
	out1, err := compiler.Config(&first, opt)
	configref.Drop(goldenVersion)
	if err != nil {
		t.Fatal(err)
	}

	// Route 1 changes, route 2 is disabled, route 3 is deleted, route 4 is
	// enabled, route 5 is new.
	next := first
	next.Routes = slices.Clone(first.Routes)
	next.Routes[0].Paths = []string{"/keyed/v2"}
	next.Routes[1].Enabled = false
	next.Routes[3].Enabled = true
	r5 := route(5, 2, "new")
	r5.Hosts = []string{"new.example.org"}
	next.Routes = append(next.Routes[:2], next.Routes[3], r5)
	next.RouteChanges = &storage.RouteChanges{
		Upserted: []storage.Route{next.Routes[0], first.Routes[1], next.Routes[2], r5},
		Removed:  []int64{3},
	}
	next.RouteChanges.Upserted[1].Enabled = false

	incOpt := opt
	incOpt.Previous = out1.Table
	inc, err := compiler.Config(&next, incOpt)
	configref.Drop(goldenVersion)
	if err != nil {
		t.Fatal(err)
	}
	full := next
	full.RouteChanges = nil
	want, err := compiler.Config(&full, opt)
	configref.Drop(goldenVersion)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(inc.Config, want.Config) {
		t.Errorf("incremental config differs:\n%s", textdiff.Lines(string(want.Config), string(inc.Config), 20))
	}
	got, _ := json.Marshal(inc.Table.Routes())
	exp, _ := json.Marshal(want.Table.Routes())
	if !bytes.Equal(got, exp) {
		t.Errorf("incremental table:\n%s\nwant\n%s", got, exp)
	}
	if out1.Table.Route(3) == nil || out1.Table.Route(5) != nil {
		t.Error("the update changed the previous table")
	}
}
