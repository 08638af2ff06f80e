package controlplane

import (
	"crypto/tls"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddytls"

	"github.com/caddy-gateway/gateway/app/compiler"
	"github.com/caddy-gateway/gateway/modules/router"
)

// Bootstrap is what the gateway needs before it can read its store: where
// the store and the admin API are, and the listeners that seed a fresh store.
type Bootstrap struct {
	// AdminListen is the address of the gateway admin API, dashboard,
	// /metrics and /healthz. Default 127.0.0.1:9080.
	AdminListen string `json:"admin_listen,omitempty"`
	// Database is "sqlite" (default) or "postgres".
	Database string `json:"database,omitempty"`
	// DSN is the SQLite file (default ./data/gateway.db) or the PostgreSQL
	// connection string. Caddy's global placeholders in it ({env.VAR},
	// {file.path}) are replaced when the store is opened (StoreDSN), so a
	// password need not be written into Caddy's JSON config, which
	// Caddy's admin endpoint serves and Caddy autosaves.
	DSN string `json:"dsn,omitempty"`
	// PostgresDSN, when it is not empty once its placeholders are
	// replaced, makes the store PostgreSQL with this DSN, whatever
	// Database and DSN say: the shipped Caddyfile's database_postgres
	// {env.GATEWAY_POSTGRES_DSN}, where an unset variable keeps SQLite.
	PostgresDSN string `json:"postgres_dsn,omitempty"`
	// HTTPListen and HTTPSListen seed the settings of a fresh store
	// (defaults :8080 and :8443); afterwards the settings resource decides.
	HTTPListen  string `json:"http_listen,omitempty"`
	HTTPSListen string `json:"https_listen,omitempty"`
	// CaddyAdmin is Caddy's own admin endpoint, read after every load the
	// control plane did not make (start, `caddy reload`, a change through
	// Caddy's admin API) to capture the rest of the running config, which
	// every generated config keeps (user site blocks keep working).
	// Default: Caddy's default admin address (honours CADDY_ADMIN).
	CaddyAdmin string `json:"caddy_admin,omitempty"`
	// ACMETrustedRoots are PEM files of extra roots trusted for the ACME
	// CA's own HTTPS (a private or test CA); default: the system roots.
	ACMETrustedRoots []string `json:"acme_trusted_roots_pem_files,omitempty"`
	// ACMEDNSResolvers are the DNS resolvers (host:port) the dns-01
	// challenge uses for its SOA and propagation lookups (tests point it at
	// a local DNS server); default: the system's.
	ACMEDNSResolvers []string `json:"acme_dns_resolvers,omitempty"`
	// CloudflareAPIURL overrides the Cloudflare API base URL of the dns-01
	// provider (tests point it at a fake); default the real API.
	CloudflareAPIURL string `json:"cloudflare_api_url,omitempty"`
	// HealthInterval overrides the 10 s active health-check interval.
	HealthInterval caddy.Duration `json:"health_interval,omitempty"`
	// NodeHTTPListen and NodeHTTPSListen, when set, are this node's proxy
	// listeners whatever the stored settings say: the nodes of a cluster
	// share one settings row, and several nodes on one host need distinct
	// addresses.
	NodeHTTPListen  string `json:"node_http_listen,omitempty"`
	NodeHTTPSListen string `json:"node_https_listen,omitempty"`
	// WASMMemoryLimit bounds the linear memory of all wasm plugin
	// instances together, in bytes (default 1 GiB, membudget.DefaultLimit).
	// Beyond it memory.grow fails inside modules and requests needing a
	// new instance are answered 503. Applies at every load.
	WASMMemoryLimit int64 `json:"wasm_memory_limit,omitempty"`
	// MaxHeaderBytes is the most a proxy listener reads of a request's
	// header section, request line included, in bytes: Caddy's servers'
	// default (16 KiB, their max_header_size), not Go's 1 MB. Every byte
	// a client may send there can be copied by request records,
	// placeholders and route matching. Applies when a listener binds.
	MaxHeaderBytes int `json:"max_header_bytes,omitempty"`
	// Redis is the redis:// or rediss:// URL
	// (redis://[user:password@]host:port/db) of the Redis server that the
	// rate-limit plugin's redis policy counts in; empty: none. Caddy's
	// global placeholders are replaced when connecting (RedisURL): the
	// shipped Caddyfile's {env.GATEWAY_REDIS_URL} keeps the password out
	// of Caddy's JSON config, and a password written here is refused
	// (Validate). Applies at every load; an unchanged URL keeps its
	// connections.
	Redis string `json:"redis,omitempty"`
}

// RedisURL is Redis with Caddy's global placeholders replaced.
func (a Bootstrap) RedisURL() string { return replacePlaceholders(a.Redis) }

// CheckRedis refuses a Redis URL whose password is written into the
// config itself (placeholders aside), and a URL that is not redis:// or
// rediss:// once they are replaced.
func (a Bootstrap) CheckRedis() error {
	if a.Redis == "" {
		return nil
	}
	if u, err := url.Parse(a.Redis); err == nil && u.User != nil {
		if _, set := u.User.Password(); set {
			return fmt.Errorf("gateway redis: the URL holds a password, which Caddy's config would show; set it in an environment variable and write {env.VAR} (the shipped Caddyfile: GATEWAY_REDIS_URL)")
		}
	}
	if raw := a.RedisURL(); raw != "" {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
			return fmt.Errorf("gateway redis: want redis://[user:password@]host:port/db or rediss://…")
		}
	}
	return nil
}

// DefaultMaxHeaderBytes is MaxHeaderBytes' default, Caddy's.
const DefaultMaxHeaderBytes = 16 << 10

// Generated is what the control plane compiles from the store (package
// compiler).
type Generated = compiler.Generated

// SetDefaults fills in the defaults of the bootstrap fields.
func (a *Bootstrap) SetDefaults() {
	if a.AdminListen == "" {
		a.AdminListen = "127.0.0.1:9080"
	}
	if a.PostgresDSN != "" && replacePlaceholders(a.PostgresDSN) != "" {
		a.Database, a.DSN = "postgres", a.PostgresDSN
	}
	if a.Database == "" {
		a.Database = "sqlite"
	}
	if a.DSN == "" && a.Database == "sqlite" {
		a.DSN = "./data/gateway.db"
	}
	if a.HTTPListen == "" {
		a.HTTPListen = ":8080"
	}
	if a.HTTPSListen == "" {
		a.HTTPSListen = ":8443"
	}
	if a.MaxHeaderBytes <= 0 {
		a.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
}

// Instance is one loaded config's gateway app as the control plane sees it:
// what Start makes live and Stop gives up. The gateway app (package
// app) provisions it.
type Instance struct {
	Bootstrap
	Generated *Generated
	Router    *router.Router
	TLSConfig *tls.Config
	TLSApp    *caddytls.TLS // the tls app of this config (HTTP-01 challenges)

	prev    atomic.Pointer[Instance] // the instance live when this one started, until it stops
	stopped atomic.Bool              // Stop was called
}

// StoreDSN is the DSN the store is opened with: DSN with Caddy's global
// placeholders replaced.
func (a Bootstrap) StoreDSN() string { return replacePlaceholders(a.DSN) }

// replacePlaceholders replaces Caddy's global placeholders ({env.VAR},
// {file.path} …) in s, leaving unknown ones as they are.
func replacePlaceholders(s string) string {
	return strings.TrimSpace(caddy.NewReplacer().ReplaceKnown(s, ""))
}
