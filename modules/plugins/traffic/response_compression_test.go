package traffic

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/caddy-gateway/gateway/modules/plugins/internal/plugintest"
)

// sized answers ?n= bytes of content type ?ct=.
func sized(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(r.URL.Query().Get("n"))
	w.Header().Set("Content-Type", r.URL.Query().Get("ct"))
	_, _ = w.Write([]byte(strings.Repeat("a", n)))
}

// decoded undoes the response's Content-Encoding.
func decoded(t *testing.T, res plugintest.Result) string {
	t.Helper()
	var r io.Reader
	switch enc := res.Header.Get("Content-Encoding"); enc {
	case "":
		return res.Body
	case "gzip":
		zr, err := gzip.NewReader(strings.NewReader(res.Body))
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	case "zstd":
		zr, err := zstd.NewReader(strings.NewReader(res.Body))
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		r = zr
	default:
		t.Fatalf("unexpected Content-Encoding %q", enc)
	}
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, r); err != nil {
		t.Fatalf("decoding %s: %v", res.Header.Get("Content-Encoding"), err)
	}
	return buf.String()
}

func TestResponseCompressionTraffic(t *testing.T) {
	g := startGW(t, []string{plugintest.HandlerJSON(t, "response-compression", `{}`)}, plugintest.WithUpstreamFunc(sized))
	cases := []struct {
		url, accept, wantEnc string
	}{
		{"/?n=2000&ct=application/json", "gzip, zstd", "zstd"}, // zstd preferred
		{"/?n=2000&ct=application/json", "gzip", "gzip"},
		{"/?n=2000&ct=text/html;+charset=utf-8", "zstd", "zstd"},
		{"/?n=2000&ct=application/json", "", ""},
		{"/?n=2000&ct=application/json", "br", ""},
		{"/?n=100&ct=application/json", "gzip", ""}, // under min_length
		{"/?n=2000&ct=image/png", "gzip", ""},       // not in encode's defaults
	}
	for _, c := range cases {
		res := g.Get(c.url, "Accept-Encoding", c.accept)
		plugintest.WantStatus(t, res, http.StatusOK)
		if got := res.Header.Get("Content-Encoding"); got != c.wantEnc {
			t.Errorf("%s Accept-Encoding %q: Content-Encoding %q, want %q", c.url, c.accept, got, c.wantEnc)
			continue
		}
		n, _ := strconv.Atoi(strings.TrimPrefix(strings.Split(c.url, "&")[0], "/?n="))
		if body := decoded(t, res); body != strings.Repeat("a", n) {
			t.Errorf("%s: decoded body of %d bytes, want %d", c.url, len(body), n)
		}
		if c.wantEnc != "" && len(res.Body) >= n {
			t.Errorf("%s: %d bytes compressed to %d", c.url, n, len(res.Body))
		}
	}
	if v := g.Get("/?n=2000&ct=application/json", "Accept-Encoding", "gzip").Header.Get("Vary"); v != "Accept-Encoding" {
		t.Errorf("Vary %q", v)
	}
}

func TestResponseCompressionOptions(t *testing.T) {
	g := startGW(t, []string{plugintest.HandlerJSON(t, "response-compression", `{"encodings":["gzip"],"min_length":0,"content_types":["text/*"]}`)}, plugintest.WithUpstreamFunc(sized))
	for _, c := range []struct{ url, wantEnc string }{
		{"/?n=10&ct=text/plain", "gzip"},                 // min_length 0
		{"/?n=2000&ct=text/csv", "gzip"},                 // text/*
		{"/?n=2000&ct=application/json", ""},             // not listed
		{"/?n=2000&ct=text/plain;charset=utf-8", "gzip"}, // parameters
	} {
		res := g.Get(c.url, "Accept-Encoding", "zstd, gzip")
		if got := res.Header.Get("Content-Encoding"); got != c.wantEnc {
			t.Errorf("%s: Content-Encoding %q, want %q", c.url, got, c.wantEnc)
		}
		decoded(t, res)
	}
}
