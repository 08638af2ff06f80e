package plugins

import (
	"strconv"

	"github.com/caddy-gateway/gateway/internal/guard"
	"github.com/caddy-gateway/gateway/schema"
)

// CheckCollectorURL checks the URL of a collector the plugins send to
// (http-log's endpoint, opentelemetry's): required, an http(s) URL, and
// never the gateway's own endpoints or a link-local or cloud metadata
// address (package guard). Errors name field. Names are checked again
// after resolution, when the plugin dials.
func CheckCollectorURL(field, raw string) error {
	if raw == "" {
		return schema.Errorf(field, "is required")
	}
	u, err := schema.HTTPURL(raw)
	if err != nil {
		return schema.Errorf(field, "%v", err)
	}
	port := 80
	if u.Scheme == "https" {
		port = 443
	}
	if p := u.Port(); p != "" {
		port, _ = strconv.Atoi(p) // HTTPURL checked it
	}
	// The gateway admin API and Caddy's admin endpoint are never a
	// collector (Caddy's would obey a POST to /stop).
	if err := guard.CheckHostPort(u.Hostname(), port); err != nil {
		return schema.Errorf(field, "%v", err)
	}
	if err := guard.CheckHost(u.Hostname()); err != nil {
		return schema.Errorf(field, "host %v", err)
	}
	return nil
}
