// Package backup is the configuration export and import of the admin API
// (docs/backup.md):
//
//	GET  /api/v1/export?include_secrets=false|true
//	POST /api/v1/import
//
// The resource kinds a document holds are listed once, in kinds (kinds.go):
// each kind says how it is exported, described in the OpenAPI document,
// cleared and restored.
package backup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/caddy-gateway/gateway/app/api"
	"github.com/caddy-gateway/gateway/schema"
	"github.com/caddy-gateway/gateway/storage"
)

// Format and Version identify an export document; import accepts exactly
// these (anything else is 400).
const (
	Format  = "gateway-export"
	Version = 1
)

const exportDescription = "The whole routing configuration as one JSON document: format \"gateway-export\", version 1, exported_at, secrets_included, " +
	"settings, services (each with its targets), routes, stream_routes, plugins, consumers (each with its credentials), certificates and wasm_modules, every list in id order. " +
	"The document is one state of the store: a change committed while it is read (on this node or another) is in it whole or not at all. " +
	"Without include_secrets (any role) no secret leaves the gateway: credentials carry no key-auth key, basic-auth password_hash or jwt secret, " +
	"and name what was left out in redacted; plugin configs carry \"<redacted>\" in place of their secret fields' values (http-log endpoint credentials and header values); certificates carry no private key; wasm_modules carry their metadata (name, size_bytes, sha256) but not the module; there is no acme section. " +
	"include_secrets=true (admin only, 403 otherwise) adds them (wasm_modules[].wasm_base64) and an acme section with the Cloudflare token and the EAB credentials, so that the document restores a working gateway; treat it as a secret. " +
	"Module bytes count against the import's 20 MiB body limit (base64 adds a third): modules totalling more than about 15 MiB cannot be restored in one import. " +
	"Users, sessions, SSO settings and the admin token are never exported."

const importDescription = "Destructive full replacement of the routing configuration (settings, services, targets, routes, stream routes, plugins, consumers, credentials) " +
	"by an export document, in one transaction: it is stored, compiled and loaded into the running proxy before the answer; on any failure the previous configuration keeps running and stays stored. " +
	"format must be \"gateway-export\" and version 1 (400 otherwise). New ids are assigned; references inside the document (route service_id and splits, plugin service_id and route_id, " +
	"stream route service_id, targets under their service, credentials under their consumer) follow the items they name. " +
	"Every item is validated as the resource's own endpoint validates it; an invalid item is 400 naming it (e.g. routes[2].paths[0]) and nothing changes. " +
	"A credential is restored like POST /api/v1/consumers/{id}/credentials: a key-auth or jwt credential without key gets a random one; a basic-auth password_hash must be a bcrypt hash of cost at most 12 (every failed login recomputes it; the API hashes with cost 10). " +
	"Items that cannot be restored are skipped and listed with a reason: a credential whose secret was redacted (named in its redacted list), a plugin whose config holds a redacted secret, a manual certificate without its key, " +
	"a WASM module without its bytes (wasm_base64, or wat as an upload may give it; modules are validated as the upload endpoint validates them, within its declared-count and time limits; 503 when a module cannot start its check within 30 s because others are being checked), a plugin of a type this gateway does not know, a wasm plugin whose module is not restored. " +
	"wasm plugins reference modules by name, so nothing is remapped for them. settings apply like PUT /api/v1/settings (listeners rebind at once); when the document has no settings they stay as they are. " +
	"An acme section replaces the stored Cloudflare token and EAB credentials; without one they stay as they are. " +
	"Users, sessions, SSO settings and the admin token are not touched."

// Endpoints are the export and import endpoints.
func Endpoints() []*api.Endpoint {
	return []*api.Endpoint{
		{Method: "GET", Path: "/api/v1/export", Role: api.RoleViewer, Tag: "backup",
			Summary:     "Export the configuration (secrets only for admins with include_secrets=true)",
			Description: exportDescription,
			Query: []api.QueryParam{{Name: "include_secrets", Type: "boolean",
				Description: "default false; true needs the admin role and adds key-auth keys, basic-auth password hashes, jwt secrets, certificate keys, WASM module bytes and the acme section (Cloudflare token, EAB credentials)"}},
			ResponseSchema: documentSchema(true), Statuses: []int{400},
			Handle: exportConfig},
		{Method: "POST", Path: "/api/v1/import", Role: api.RoleAdmin, Tag: "backup",
			Summary:     "Import an export document (destructive full replacement of the routing configuration)",
			Description: importDescription,
			BodySchema:  documentSchema(false), ResponseSchema: reportSchema(), Statuses: []int{400, 503},
			Handle: importConfig},
	}
}

// forbidden is a 403.
func forbidden(msg string) error { return &api.APIError{Status: http.StatusForbidden, Msg: msg} }

func exportConfig(c *api.Call) (any, error) {
	secrets := false
	if v := c.R.URL.Query().Get("include_secrets"); v != "" {
		b, err := strconv.ParseBool(strings.ToLower(v))
		if err != nil {
			return nil, api.BadRequest("include_secrets: must be true or false")
		}
		secrets = b
	}
	if secrets {
		role := api.RolePublic
		if p := api.PrincipalFrom(c.Ctx()); p != nil {
			role, _ = api.ParseRole(p.Role)
		}
		if role < api.RoleAdmin {
			return nil, forbidden("include_secrets=true needs the admin role")
		}
	}
	return Export(c.Ctx(), c.CP.Store(), secrets)
}

// Export builds the export document from one consistent read of the store
// (storage.Store.ConsistentRead): a change committed while it reads is in
// the document whole or not at all, so every reference in it (a route's
// service_id, a plugin's route_id …) names an item of the document.
func Export(ctx context.Context, st *storage.Store, secrets bool) (map[string]any, error) {
	doc := map[string]any{
		"format":           Format,
		"version":          Version,
		"exported_at":      time.Now().UTC(),
		"secrets_included": secrets,
	}
	err := st.ConsistentRead(ctx, func(tx *gorm.DB) error {
		for _, k := range kinds {
			v, err := k.Export(tx, secrets)
			if err != nil {
				return fmt.Errorf("exporting %s: %w", k.Name, err)
			}
			if k.SecretsOnly && !secrets {
				continue
			}
			doc[k.Name] = v
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return doc, nil
}

// Report is the answer of an import.
type Report struct {
	Restored map[string]int `json:"restored"`
	Skipped  []Skipped      `json:"skipped"`
}

// Skipped is an item of the document that was not restored.
type Skipped struct {
	Kind   string `json:"kind" doc:"credential, plugin, certificate or wasm_module"`
	Ref    string `json:"ref" doc:"Where the item is in the document, e.g. consumers[0].credentials[1]."`
	Reason string `json:"reason"`
}

func importConfig(c *api.Call) (any, error) {
	body, err := io.ReadAll(c.R.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, api.BadRequest("request body is larger than 20 MiB")
		}
		return nil, api.BadRequest("reading request body: " + err.Error())
	}
	doc, err := parseDocument(body)
	if err != nil {
		return nil, err
	}
	r := newRestorer(c.CP)
	if err := r.prepare(c.Ctx(), doc); err != nil {
		return nil, err
	}
	var rep *Report
	err = c.CP.Mutate(c.Ctx(), func(tx *gorm.DB) error {
		r.Tx = tx
		if err := r.run(doc); err != nil {
			return err
		}
		rep = r.report()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// parseDocument checks the envelope: a JSON object with format
// "gateway-export", version 1 and no field this version does not know.
func parseDocument(body []byte) (map[string]json.RawMessage, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil || doc == nil {
		return nil, api.BadRequest("the body must be an export document (a JSON object)")
	}
	var format string
	if raw, ok := doc["format"]; !ok || json.Unmarshal(raw, &format) != nil || format != Format {
		return nil, schema.Errorf("format", "must be %q", Format)
	}
	// The integer 1 as a JSON number: json.Number would also take "1".
	if raw, ok := doc["version"]; !ok || string(bytes.TrimSpace(raw)) != strconv.Itoa(Version) {
		return nil, schema.Errorf("version", "must be the integer %d (the export versions this gateway reads)", Version)
	}
	known := map[string]bool{"format": true, "version": true, "exported_at": true, "secrets_included": true}
	for _, k := range kinds {
		known[k.Name] = true
	}
	for k := range doc {
		if !known[k] {
			return nil, schema.Errorf(k, "unknown field")
		}
	}
	if raw, ok := doc["secrets_included"]; ok {
		var b *bool
		if json.Unmarshal(raw, &b) != nil {
			return nil, schema.Errorf("secrets_included", "must be a boolean")
		}
	}
	if raw, ok := doc["exported_at"]; ok {
		var t *time.Time
		if json.Unmarshal(raw, &t) != nil {
			return nil, schema.Errorf("exported_at", "must be a date-time")
		}
	}
	return doc, nil
}

// documentSchema is the export document's schema: output (every field
// present) or input (format and version required, the rest optional).
func documentSchema(output bool) map[string]any {
	mode := schema.Input
	if output {
		mode = schema.Output
	}
	props := map[string]any{
		"format":           map[string]any{"type": "string", "enum": []any{Format}},
		"version":          map[string]any{"type": "integer", "enum": []any{Version}},
		"exported_at":      map[string]any{"type": "string", "format": "date-time"},
		"secrets_included": map[string]any{"type": "boolean"},
	}
	required := []string{"format", "version"}
	if output {
		required = append(required, "exported_at", "secrets_included")
	}
	for _, k := range kinds {
		props[k.Name] = k.Schema(mode)
		if output && !k.SecretsOnly {
			required = append(required, k.Name)
		}
	}
	return map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false}
}

func reportSchema() map[string]any {
	counts := map[string]any{}
	var names []string
	for _, k := range kinds {
		for _, n := range k.Counts {
			counts[n] = map[string]any{"type": "integer", "minimum": 0}
			names = append(names, n)
		}
	}
	return map[string]any{
		"type": "object", "required": []string{"restored", "skipped"}, "additionalProperties": false,
		"properties": map[string]any{
			"restored": map[string]any{"type": "object", "properties": counts, "required": names, "additionalProperties": false,
				"description": "How many items of each kind were restored."},
			"skipped": map[string]any{"type": "array", "items": schema.JSONSchema(Skipped{}, schema.Output),
				"description": "Items that could not be restored, with the reason."},
		},
	}
}
