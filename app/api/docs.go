package api

import (
	_ "embed"
)

// docsHTML renders the OpenAPI document in the browser; it is embedded in
// the binary and loads nothing from elsewhere.
//
//go:embed assets/docs.html
var docsHTML []byte

func serveDocs(c *Call) {
	c.W.Header().Set("Content-Type", "text/html; charset=utf-8")
	// It loads only /openapi.json and is never shown in another site's
	// frame (clickjacking), like the dashboard.
	c.W.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline' 'self'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	c.W.Header().Set("X-Frame-Options", "DENY")
	_, _ = c.W.Write(docsHTML)
}
