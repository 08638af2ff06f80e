package pgstore

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

// TestEventStreamEndsWithItsCredential: an event stream (request records
// of every proxied request, for as long as it stays open) ends once the
// credential it was opened with is revoked: the admin token rotated, the
// user deleted. Authentication is in the store, so the revocation may come
// from any node of a cluster; the stream was authenticated once, when it
// opened, and went on streaming for ever to a rotated token or a deleted
// user. A stream whose credential is still valid goes on.
func TestEventStreamEndsWithItsCredential(t *testing.T) {
	g := pgGateway(t)
	up := testgw.Upstream(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	sid := g.Service("s", strings.TrimPrefix(up.URL, "http://"))
	g.Route("r", sid, testgw.Paths("/ev"))
	old := g.Must("POST", "/api/v1/admin/token", nil)["token"].(string)
	g.Header = http.Header{"Authorization": {"Bearer " + old}}
	uid := testgw.ID(g.Must("POST", "/api/v1/users", map[string]any{"email": "viewer@example.com", "role": "viewer", "password": "viewer-password-1"}))
	viewer := g.Login("viewer@example.com", "viewer-password-1")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := func(h http.Header) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", g.AdminURL+"/api/v1/events", nil)
		req.Header = h.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("opening an event stream: %v %v", resp, err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	ended := func(resp *http.Response) chan struct{} {
		done := make(chan struct{})
		go func() { io.Copy(io.Discard, resp.Body); close(done) }()
		return done
	}
	byToken := ended(open(g.Header))
	byUser := ended(open(viewer))

	fresh := g.Must("POST", "/api/v1/admin/token", nil)["token"].(string)
	g.Header = http.Header{"Authorization": {"Bearer " + fresh}}
	g.Must("DELETE", fmt.Sprintf("/api/v1/users/%d", uid), nil)
	stillValid := open(g.Header)

	for what, done := range map[string]chan struct{}{"the rotated admin token's": byToken, "the deleted user's": byUser} {
		select {
		case <-done:
		case <-ctx.Done():
			t.Fatalf("%s event stream is still open", what)
		}
	}
	// The stream opened with the current token still carries events.
	sc := bufio.NewScanner(stillValid.Body)
	g.Get("", "/ev")
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") && strings.Contains(sc.Text(), `"/ev"`) {
			return
		}
	}
	t.Fatalf("the stream of the current admin token ended: %v", sc.Err())
}
