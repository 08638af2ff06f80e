package plugins_test

import (
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/modules/plugins"
)

// TestCheckCollectorURL: the collectors of http-log and opentelemetry are
// refused by one rule, naming the field; nothing is dialed.
func TestCheckCollectorURL(t *testing.T) {
	for raw, want := range map[string]string{
		"":                                  "endpoint: is required",
		"ftp://127.0.0.1/x":                 "endpoint: ",
		"http://169.254.169.254/v1/traces":  "endpoint: host ",
		"http://[fe80::1]:4318/v1/traces":   "endpoint: host ",
		"http://100.100.100.200/v1/traces":  "endpoint: host ",
		"http://127.0.0.1:4318/v1/traces":   "",
		"https://collector.internal/v1/log": "",
	} {
		err := plugins.CheckCollectorURL("endpoint", raw)
		switch {
		case want == "" && err != nil:
			t.Errorf("%q: %v", raw, err)
		case want != "" && (err == nil || !strings.HasPrefix(err.Error(), want)):
			t.Errorf("%q: %v, want an error starting %q", raw, err, want)
		}
	}
}
