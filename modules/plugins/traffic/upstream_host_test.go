package traffic

import (
	"testing"

	"github.com/caddy-gateway/gateway/modules/router"
)

// The placeholder request-transform overrides is the one the gateway's
// service proxies read the upstream Host from.
func TestUpstreamHostKeyIsTheRouters(t *testing.T) {
	if "{"+upstreamHostKey+"}" != router.UpstreamHostHeader {
		t.Fatalf("upstreamHostKey %q, router.UpstreamHostHeader %q", upstreamHostKey, router.UpstreamHostHeader)
	}
}
