package gwproxy_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"testing"
)

// informationalUpstream answers every request with the 1xx codes listed
// in its query (?1xx=100,102,103), each with a Link header naming it and
// a hop-by-hop header, then 200.
func informationalUpstream(t *testing.T) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, c := range strings.Split(r.URL.Query().Get("1xx"), ",") {
			var code int
			if _, err := fmt.Sscan(c, &code); err != nil {
				continue
			}
			h := w.Header()
			h.Set("Link", fmt.Sprintf("</%d.css>; rel=preload", code))
			h.Set("Connection", "X-Hop")
			h.Set("X-Hop", "drop me")
			w.WriteHeader(code)
		}
		clear(w.Header())
		w.Header().Set("X-Up", "final")
		_, _ = io.WriteString(w, "body")
	}))
	t.Cleanup(up.Close)
	return up
}

// get1xx sends a GET through the gateway and describes every 1xx the
// client got (code and headers) and the final answer.
func get1xx(t *testing.T, url string) (informational []string, res *http.Response, body string) {
	t.Helper()
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		informational = append(informational, fmt.Sprintf("%d Link=%q X-Hop=%q X-Before-Proxy=%q",
			code, h.Get("Link"), h.Get("X-Hop"), h.Get("X-Before-Proxy")))
		return nil
	}}
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("X-Before-Proxy", "plugin")
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return informational, res, string(b)
}

// A target's 102 and 103 reach the client before the final response,
// each with its own headers only; 100 Continue is the server's own
// business and is not repeated; the headers set for the final response
// before proxying are in the final response and not in the 1xx.
func TestInformationalResponsesForwarded(t *testing.T) {
	up := informationalUpstream(t)
	_, gw, stop := front(t, fmt.Sprintf(`{"upstreams": [{"dial": %q}]}`, addr(up)), false)
	defer stop()

	got, res, body := get1xx(t, gw.URL+"/?1xx=100,102,103")
	want := []string{
		`102 Link="</102.css>; rel=preload" X-Hop="" X-Before-Proxy=""`,
		`103 Link="</103.css>; rel=preload" X-Hop="" X-Before-Proxy=""`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the client got the informational responses\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if res.StatusCode != 200 || body != "body" || res.Header.Get("X-Up") != "final" ||
		res.Header.Get("X-Before-Proxy") != "plugin" || res.Header.Get("Link") != "" {
		t.Fatalf("final answer %d %q, headers %v", res.StatusCode, body, res.Header)
	}
}

// A target that never stops sending informational responses fails the
// attempt once it has sent more than the gateway forwards.
func TestTooManyInformationalResponses(t *testing.T) {
	up := informationalUpstream(t)
	_, gw, stop := front(t, fmt.Sprintf(`{"upstreams": [{"dial": %q}]}`, addr(up)), false)
	defer stop()

	many := strings.TrimSuffix(strings.Repeat("103,", 11), ",")
	got, res, _ := get1xx(t, gw.URL+"/?1xx="+many)
	if len(got) != 10 || res.StatusCode != http.StatusBadGateway {
		t.Fatalf("the client got %d informational responses and %d, want 10 and 502", len(got), res.StatusCode)
	}
	// ten is fine
	got, res, _ = get1xx(t, gw.URL+"/?1xx="+strings.TrimSuffix(strings.Repeat("103,", 10), ","))
	if len(got) != 10 || res.StatusCode != 200 {
		t.Fatalf("the client got %d informational responses and %d, want 10 and 200", len(got), res.StatusCode)
	}
}
