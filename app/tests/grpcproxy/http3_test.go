package grpcproxy

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go/http3"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/internal/certtest"
)

// TestHTTP3Listener: the HTTPS proxy listener serves HTTP/3 on its port
// (UDP) with the tls app's certificate, advertises it with Alt-Svc on
// HTTP/1.1 and HTTP/2 answers, keeps an HTTP/3 download going across a
// config change, and the http3 setting turns it off.
func TestHTTP3Listener(t *testing.T) {
	certPEM, keyPEM, pool := certtest.SelfSigned(t, "h3.test")
	g := testgw.Start(t, &testgw.Options{Apps: map[string]any{
		"tls": map[string]any{"certificates": map[string]any{"load_pem": []any{map[string]any{"certificate": certPEM, "key": keyPEM}}}},
	}})
	httpsAddr := testgw.FreeAddr(t)
	g.Must("PUT", "/api/v1/settings", map[string]any{"http_listen": g.ProxyAddr, "https_listen": httpsAddr, "https_enabled": true})

	const chunks = 20
	up := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			for i := 0; i < chunks; i++ {
				fmt.Fprintf(w, "chunk %02d\n", i)
				w.(http.Flusher).Flush()
				time.Sleep(50 * time.Millisecond)
			}
			return
		}
		fmt.Fprintf(w, "proto %s", r.Header.Get("Via"))
	})
	svc := g.Service("web", testgw.Addr(up))
	g.Route("web", svc, map[string]any{"paths": []string{"/"}})

	tlsConf := &tls.Config{RootCAs: pool, ServerName: "h3.test"}
	h2 := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConf, ForceAttemptHTTP2: true}}
	h3tr := &http3.Transport{TLSClientConfig: tlsConf}
	defer h3tr.Close()
	h3 := &http.Client{Timeout: 10 * time.Second, Transport: h3tr}
	url := "https://" + httpsAddr

	res, err := h2.Get(url + "/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	_, port, _ := strings.Cut(httpsAddr, ":")
	if res.ProtoMajor != 2 || res.Header.Get("Alt-Svc") != `h3=":`+port+`"; ma=2592000` {
		t.Fatalf("HTTP/2 answer %s, Alt-Svc %q", res.Proto, res.Header.Get("Alt-Svc"))
	}

	res, err = h3.Get(url + "/")
	if err != nil {
		t.Fatalf("HTTP/3: %v", err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.ProtoMajor != 3 || res.StatusCode != 200 || !strings.HasPrefix(string(body), "proto 3.0 Caddy") {
		t.Fatalf("HTTP/3 answer %s %d %q", res.Proto, res.StatusCode, body)
	}

	// a config change during an HTTP/3 download
	res, err = h3.Get(url + "/slow")
	if err != nil {
		t.Fatal(err)
	}
	g.Route("other", g.Service("other", testgw.Addr(up)), map[string]any{"paths": []string{"/other"}})
	body, err = io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || strings.Count(string(body), "chunk") != chunks {
		t.Fatalf("download across a change: %v, %q", err, body)
	}
	if res, err := h3.Get(url + "/other"); err != nil || res.StatusCode != 200 {
		t.Fatalf("new route over HTTP/3: %v", err)
	} else {
		res.Body.Close()
	}

	// turned off: no Alt-Svc, QUIC handshakes refused
	s := g.Must("GET", "/api/v1/settings", nil)
	s["http3"] = false
	g.Must("PUT", "/api/v1/settings", s)
	h2.CloseIdleConnections()
	res, err = h2.Get(url + "/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if v := res.Header.Get("Alt-Svc"); v != "" {
		t.Fatalf("Alt-Svc with http3 off: %q", v)
	}
	fresh := &http3.Transport{TLSClientConfig: tlsConf}
	defer fresh.Close()
	if res, err := (&http.Client{Timeout: 3 * time.Second, Transport: fresh}).Get(url + "/"); err == nil {
		res.Body.Close()
		t.Fatal("HTTP/3 served with http3 off")
	}
}
