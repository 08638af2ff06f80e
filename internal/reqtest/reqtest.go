// Package reqtest builds (and sends) the requests of the gateway's HTTP
// test harnesses (modules/plugins/internal/plugintest,
// app/internal/testgw), which give headers as name, value pairs. Its
// tests are theirs.
package reqtest

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// New returns a request; hdr holds header name, value pairs (added in
// order), a "Host" pair setting the request's host. A bad method or URL
// ends t.
func New(t testing.TB, method, url string, body io.Reader, hdr ...string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if strings.EqualFold(hdr[i], "Host") {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Add(hdr[i], hdr[i+1])
	}
	return req
}

// Do sends req with c and reads the whole response body, then closes it;
// a failure of either ends t.
func Do(t testing.TB, c *http.Client, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", req.Method, req.URL, err)
	}
	return resp, b
}
