package apps

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/caddy-gateway/gateway/app/api"
	"github.com/caddy-gateway/gateway/internal/guard"
)

// probeTimeout bounds the whole probe: connect, TLS handshake and the
// response headers.
const probeTimeout = 5 * time.Second

func testUpstream(c *api.Call) (any, error) {
	in := new(UpstreamTest)
	if err := c.Decode(in); err != nil {
		return nil, err
	}
	return probe(c.Ctx(), in.upstream.Origin()), nil
}

// probe sends one GET to target: no environment proxy, verified TLS (the
// system roots), no redirect following, no keep-alive, and the body is
// never read. Failures are part of the answer, not errors.
func probe(ctx context.Context, target string) *UpstreamProbe {
	tr := &http.Transport{
		Proxy:                 nil,                                                          // never HTTP_PROXY and friends
		DialContext:           guard.Dialer(&net.Dialer{Timeout: probeTimeout}).DialContext, // never the admin endpoints
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},                    // verification on
		TLSHandshakeTimeout:   probeTimeout,
		ResponseHeaderTimeout: probeTimeout,
		DisableKeepAlives:     true,
		ForceAttemptHTTP2:     true,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{
		Transport:     tr,
		Timeout:       probeTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return &UpstreamProbe{Message: "cannot build the request: " + err.Error()}
	}
	req.Header.Set("User-Agent", "caddy-gateway-upstream-probe")
	start := time.Now()
	resp, err := client.Do(req)
	latency := time.Since(start).Milliseconds()
	if latency < 0 {
		latency = 0
	}
	if err != nil {
		return &UpstreamProbe{Reachable: false, Status: nil, LatencyMS: latency, Message: describeFailure(err)}
	}
	// Not consumed: closing without reading drops the connection.
	_ = resp.Body.Close()
	status := resp.StatusCode
	msg := "upstream answered " + resp.Status
	if loc := resp.Header.Get("Location"); status >= 300 && status < 400 && loc != "" {
		msg += " (redirect to " + loc + ", not followed)"
	}
	return &UpstreamProbe{Reachable: true, Status: &status, LatencyMS: latency, Message: msg}
}

// describeFailure says why the upstream was not reached.
func describeFailure(err error) string {
	inner := err
	var ue *url.Error
	if errors.As(err, &ue) {
		inner = ue.Err
	}
	var (
		verr  *tls.CertificateVerificationError
		unk   x509.UnknownAuthorityError
		host  x509.HostnameError
		inval x509.CertificateInvalidError
		rec   tls.RecordHeaderError
		dns   *net.DNSError
		nerr  net.Error
	)
	switch {
	case errors.As(err, &verr), errors.As(err, &unk), errors.As(err, &host), errors.As(err, &inval):
		return "TLS certificate verification failed: " + inner.Error()
	case errors.As(err, &rec), strings.Contains(inner.Error(), "HTTP response to HTTPS client"):
		return "the upstream did not answer with TLS (is it plain HTTP?): " + inner.Error()
	case errors.As(err, &dns):
		return "cannot resolve the upstream host: " + inner.Error()
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused: " + inner.Error()
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &nerr) && nerr.Timeout():
		return "no answer within " + strconv.Itoa(int(probeTimeout/time.Second)) + " seconds: " + inner.Error()
	}
	return "connection failed: " + inner.Error()
}
