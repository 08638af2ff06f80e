// Package caddyfile adapts the Caddyfile to the gateway: the `gateway`
// global option configures the gateway app.
//
//	{
//		gateway {
//			admin_listen 127.0.0.1:9080
//			database sqlite ./data/gateway.db   # or: database postgres <dsn>
//			database_postgres <dsn>             # when non-empty at start, overrides database
//			                                    # ({env.VAR} keeps a password out of Caddy's JSON)
//			http_listen :8080
//			https_listen :8443
//			node_http_listen :8081              # optional: this node's own listeners,
//			node_https_listen :8444             # whatever the stored settings say
//			caddy_admin localhost:2019          # optional
//			health_interval 10s                 # optional
//			wasm_memory_limit 1GiB              # optional: all wasm instances together
//			max_header_size 16KiB               # optional: a proxied request's header section
//			redis {env.GATEWAY_REDIS_URL}       # optional: the rate limits' Redis (policy redis)
//		}
//	}
package caddyfile

import (
	"encoding/json"
	"math"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/dustin/go-humanize"

	"github.com/caddy-gateway/gateway/app"
)

func init() {
	httpcaddyfile.RegisterGlobalOption("gateway", parseGateway)
}

func parseGateway(d *caddyfile.Dispenser, _ any) (any, error) {
	gw := new(app.App)
	d.Next() // the option name
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "admin_listen":
			if !d.AllArgs(&gw.AdminListen) {
				return nil, d.ArgErr()
			}
		case "database":
			args := d.RemainingArgs()
			if len(args) != 2 {
				return nil, d.Errf("database needs a kind (sqlite or postgres) and a file or DSN")
			}
			// An empty value (an unset {$GATEWAY_POSTGRES_DSN}) keeps the default.
			gw.Database, gw.DSN = args[0], args[1]
		case "database_postgres":
			// PostgreSQL when a DSN is given, e.g. from an environment
			// variable that is empty by default: decided at start when it
			// is a runtime placeholder ({env.GATEWAY_POSTGRES_DSN}, which
			// keeps a password out of Caddy's JSON config).
			// A keyword/value DSN ("host=db port=5432 user=gw", as libpq
			// users write it) arrives from {$GATEWAY_POSTGRES_DSN} as
			// several tokens: join them again.
			gw.PostgresDSN = strings.TrimSpace(strings.Join(d.RemainingArgs(), " "))
		case "http_listen":
			if !d.AllArgs(&gw.HTTPListen) {
				return nil, d.ArgErr()
			}
		case "https_listen":
			if !d.AllArgs(&gw.HTTPSListen) {
				return nil, d.ArgErr()
			}
		case "node_http_listen", "node_https_listen":
			// This node's own proxy listeners (cluster nodes on one host);
			// empty (an unset environment variable) means the settings'.
			dst := &gw.NodeHTTPListen
			if d.Val() == "node_https_listen" {
				dst = &gw.NodeHTTPSListen
			}
			args := d.RemainingArgs()
			if len(args) > 1 {
				return nil, d.ArgErr()
			}
			if len(args) == 1 {
				*dst = args[0]
			}
		case "redis":
			// The rate limits' Redis URL; empty (an unset environment
			// variable) means none. {env.VAR} keeps a password out of
			// Caddy's JSON config (one written here is refused).
			args := d.RemainingArgs()
			if len(args) > 1 {
				return nil, d.ArgErr()
			}
			if len(args) == 1 {
				gw.Redis = args[0]
			}
		case "caddy_admin":
			if !d.AllArgs(&gw.CaddyAdmin) {
				return nil, d.ArgErr()
			}
		case "health_interval":
			var s string
			if !d.AllArgs(&s) {
				return nil, d.ArgErr()
			}
			dur, err := caddy.ParseDuration(s)
			if err != nil {
				return nil, d.Errf("health_interval: %v", err)
			}
			gw.HealthInterval = caddy.Duration(dur)
		case "wasm_memory_limit":
			n, err := sizeArg(d, math.MaxInt64, "512MiB or 2GiB")
			if err != nil {
				return nil, err
			}
			gw.WASMMemoryLimit = n
		case "max_header_size":
			n, err := sizeArg(d, math.MaxInt32, "16KiB or 1MiB")
			if err != nil {
				return nil, err
			}
			gw.MaxHeaderBytes = int(n)
		default:
			return nil, d.Errf("unknown gateway option %q", d.Val())
		}
	}
	return httpcaddyfile.App{Name: "gateway", Value: toJSON(gw)}, nil
}

// sizeArg reads the option's one argument, a size in bytes ("16KiB",
// "1GiB") from 1 to max.
func sizeArg(d *caddyfile.Dispenser, max uint64, examples string) (int64, error) {
	opt := d.Val()
	var s string
	if !d.AllArgs(&s) {
		return 0, d.ArgErr()
	}
	n, err := humanize.ParseBytes(s)
	if err != nil || n == 0 || n > max {
		return 0, d.Errf("%s: must be a size such as %s", opt, examples)
	}
	return int64(n), nil
}

func toJSON(app *app.App) json.RawMessage {
	b, _ := json.Marshal(app)
	return b
}
