// Package dashboard serves the admin web dashboard of the gateway: a
// single-page application (vanilla JavaScript and CSS, embedded in the
// binary, nothing loaded from elsewhere) at GET / of the admin listener,
// with its files under /dashboard/assets/. It talks only to the admin API
// of the same origin, and is updated live through GET /api/v1/events.
//
// Importing the package registers its endpoints (gateway.go does).
package dashboard

import (
	"embed"
	"maps"
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/caddy-gateway/gateway/app/api"
)

//go:embed static
var static embed.FS

// AssetPrefix is where the dashboard's files are served.
const AssetPrefix = "/dashboard/assets/"

// Assets are the files served under AssetPrefix with their content types.
var Assets = map[string]string{
	"app.js":  "text/javascript; charset=utf-8",
	"app.css": "text/css; charset=utf-8",
}

// csp allows only the admin server itself: no inline script, no other host.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// Endpoints serve the dashboard.
func Endpoints() []*api.Endpoint {
	eps := []*api.Endpoint{{
		Method: "GET", Path: "/", Role: api.RolePublic, Tag: "dashboard",
		Summary: "Admin web dashboard (single-page application)",
		Description: "The page signs in with the admin API (password, SSO or admin token) and then uses the API itself; " +
			"it shows ?sso_error= after a failed SSO sign-in. Only the exact path / is the dashboard.",
		ContentType: "text/html", Raw: serveIndex,
	}}
	for _, name := range sortedAssets() {
		name, ct := name, Assets[name]
		mt, _, _ := strings.Cut(ct, ";")
		eps = append(eps, &api.Endpoint{
			Method: "GET", Path: AssetPrefix + name, Role: api.RolePublic, Tag: "dashboard",
			Summary: "Dashboard file " + name, ContentType: mt,
			Raw: func(c *api.Call) { serveFile(c, name, ct) },
		})
	}
	return eps
}

func serveIndex(c *api.Call) {
	// GET / is a ServeMux catch-all for GET: any other unknown path answers
	// as the framework's own 404 does.
	if c.R.URL.Path != "/" {
		api.WriteJSON(c.W, http.StatusNotFound, api.ErrorBody{Error: "no such endpoint: " + c.R.Method + " " + c.R.URL.Path})
		return
	}
	b, err := static.ReadFile("static/index.html")
	if err != nil {
		c.Fail(err)
		return
	}
	h := c.W.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	_, _ = c.W.Write(b)
}

func serveFile(c *api.Call, name, ct string) {
	b, err := static.ReadFile(path.Join("static", name))
	if err != nil {
		c.Fail(err)
		return
	}
	h := c.W.Header()
	h.Set("Content-Type", ct)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	_, _ = c.W.Write(b)
}

func sortedAssets() []string { return slices.Sorted(maps.Keys(Assets)) }
