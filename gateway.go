// Package gateway is the Caddy Gateway module bundle. Importing it registers
// every module of the gateway with Caddy (as xcaddy's --with does):
//
//	import _ "github.com/caddy-gateway/gateway"
//
// It holds no code; app/tests/binary_test.go builds cmd/caddy, which
// imports it, and runs the binary.
package gateway

import (
	_ "github.com/caddy-gateway/gateway/app"
	_ "github.com/caddy-gateway/gateway/caddyfile"
	_ "github.com/caddy-gateway/gateway/modules/certevents"
	_ "github.com/caddy-gateway/gateway/modules/dnsproviders/cloudflare"
	_ "github.com/caddy-gateway/gateway/modules/gwproxy"
	_ "github.com/caddy-gateway/gateway/modules/gwtls"
	_ "github.com/caddy-gateway/gateway/modules/plugins"
	_ "github.com/caddy-gateway/gateway/modules/plugins/auth"
	_ "github.com/caddy-gateway/gateway/modules/plugins/httplog"
	_ "github.com/caddy-gateway/gateway/modules/plugins/opentelemetry"
	_ "github.com/caddy-gateway/gateway/modules/plugins/proxycache"
	_ "github.com/caddy-gateway/gateway/modules/plugins/ratelimit"
	_ "github.com/caddy-gateway/gateway/modules/plugins/traffic"
	_ "github.com/caddy-gateway/gateway/modules/plugins/waf"
	_ "github.com/caddy-gateway/gateway/modules/plugins/wasm"
	_ "github.com/caddy-gateway/gateway/modules/router"
)
