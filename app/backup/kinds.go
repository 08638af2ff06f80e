package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"gorm.io/gorm"

	"github.com/caddy-gateway/gateway/app/certs"
	"github.com/caddy-gateway/gateway/app/controlplane"
	"github.com/caddy-gateway/gateway/app/domain"
	"github.com/caddy-gateway/gateway/app/pluginapi"
	"github.com/caddy-gateway/gateway/app/wasmapi"
	"github.com/caddy-gateway/gateway/internal/consumers"
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/schema"
	"github.com/caddy-gateway/gateway/storage"
)

// Certificates.

// certificateFields are certs.Certificate's fields without its creation
// rules: a document's manual certificate lists its names, which an import
// ignores (certs.Certificate.FromDocument) before the rules run.
type certificateFields certs.Certificate

// withSecret is the schema of decl's items in a document (itemSchema) with
// its write-only field secret, which exports with include_secrets carry (a
// certificate's private key, a WASM module's bytes).
func withSecret(decl any, mode schema.Mode, secret string) map[string]any {
	s := itemSchema(decl, mode, nil)
	p := maps.Clone(schema.JSONSchema(decl, schema.Input)["properties"].(map[string]any)[secret].(map[string]any))
	delete(p, "writeOnly")
	s["properties"].(map[string]any)[secret] = p
	return s
}

var certificatesKind = Kind{
	Name:   "certificates",
	Counts: []string{"certificates"},
	Schema: func(mode schema.Mode) map[string]any { return arrayOf(withSecret(certs.Certificate{}, mode, "key")) },
	Export: func(tx *gorm.DB, secrets bool) (any, error) {
		now := time.Now()
		return listAs(tx, func(row *certs.Row) certs.Certificate { return certs.Exported(row, now, secrets) })
	},
	Clear: deleteAll(&certs.Row{}),
	Restore: func(r *Restorer, raw json.RawMessage) error {
		return eachRow(r, "certificates", raw, "", func(it item, fields *certificateFields) error {
			in := certs.Certificate(*fields)
			if !in.ACME && in.Key == nil {
				r.Skip("certificate", it.path, "the private key is not in the document (export with include_secrets=true)")
				return nil
			}
			in.FromDocument()
			if err := prefix(it.path, in.Validate()); err != nil {
				return err
			}
			row, err := in.Row()
			if err != nil {
				return prefix(it.path, err)
			}
			if err := certs.DomainsFree(r.Tx, row); err != nil {
				return prefix(it.path, err)
			}
			return r.create(it.path, "certificates", row)
		})
	},
}

// WASM modules.

// moduleFields are wasmapi.Module's fields without its upload rules: a
// document's module without its bytes (an export without secrets) is
// skipped, not refused, before the rules run.
type moduleFields wasmapi.Module

var wasmModulesKind = Kind{
	Name:   "wasm_modules",
	Counts: []string{"wasm_modules"},
	Schema: func(mode schema.Mode) map[string]any {
		return arrayOf(withSecret(wasmapi.Module{}, mode, "wasm_base64"))
	},
	Export: func(tx *gorm.DB, secrets bool) (any, error) {
		q := tx
		if !secrets {
			q = tx.Omit("wasm")
		}
		return listAs(q, func(m *wasmapi.Row) wasmapi.Module { return wasmapi.Exported(m, secrets) })
	},
	Clear: deleteAll(&wasmapi.Row{}),
	// The upload endpoint's rules (name, size, assembling, the runtime's
	// check) run before the import takes the control plane's lock: a
	// module may take seconds to compile.
	Prepare: func(ctx context.Context, r *Restorer, raw json.RawMessage) error {
		return eachRow(r, "wasm_modules", raw, "", func(it item, fields *moduleFields) error {
			in := wasmapi.Module(*fields)
			if !in.HasModule() {
				return nil
			}
			if err := prefix(it.path, in.Validate()); err != nil {
				return err
			}
			row, err := in.Row(ctx)
			if err != nil {
				return prefix(it.path, err)
			}
			r.prepared[it.path] = row
			return nil
		})
	},
	Restore: func(r *Restorer, raw json.RawMessage) error {
		return eachRow(r, "wasm_modules", raw, "", func(it item, fields *moduleFields) error {
			in := wasmapi.Module(*fields)
			if !in.HasModule() {
				r.Skip("wasm_module", it.path, fmt.Sprintf("module %q: its bytes are not in the document (export with include_secrets=true)", in.Name))
				return nil
			}
			row, ok := r.prepared[it.path].(*wasmapi.Row)
			if !ok {
				return fmt.Errorf("wasm module %s was not prepared before the restore", it.path)
			}
			if err := r.create(it.path, "wasm_modules", row); err != nil {
				return err
			}
			r.WasmModules[row.Name] = true
			return nil
		})
	},
}

// Kind is one kind of resource in an export document: one field of the
// document and how it is exported, described, cleared and restored.
type Kind struct {
	// Name is the document's field.
	Name string
	// Counts are the counters of the import report's restored object that
	// this kind fills (services also counts targets …).
	Counts []string
	// Schema describes the field's value: Output for exports, Input for the
	// import body.
	Schema func(mode schema.Mode) map[string]any
	// Export reads the stored rows; secrets adds secret values.
	Export func(tx *gorm.DB, secrets bool) (any, error)
	// Clear deletes the stored rows before a restore (nil: nothing to
	// delete). Kinds are cleared in the reverse of their order.
	Clear func(tx *gorm.DB) error
	// Prepare (optional) does, before the import takes the control
	// plane's lock and opens its transaction, the work that must not hold
	// them (compiling modules), keeping its results in the Restorer for
	// Restore; ctx is the request's.
	Prepare func(ctx context.Context, r *Restorer, raw json.RawMessage) error
	// Restore validates and stores the document's value (nil when the
	// document lacks the field).
	Restore func(r *Restorer, raw json.RawMessage) error
	// SecretsOnly kinds are in exports with secrets only (Export returns
	// nil without them).
	SecretsOnly bool
}

// kinds is the one list of what a document holds, in restore order: a
// kind comes after every kind its items reference (wasm plugins look their
// module up in Restorer.WasmModules).
var kinds = []Kind{
	settingsKind,
	wasmModulesKind,
	certificatesKind,
	servicesKind,
	routesKind,
	streamRoutesKind,
	consumersKind,
	pluginsKind,
	acmeKind,
}

// rowsKind is a kind whose document items are its table's rows as they
// are (one counter, named as the kind).
func rowsKind[T any](name string, restore func(r *Restorer, raw json.RawMessage) error) Kind {
	return Kind{
		Name:    name,
		Counts:  []string{name},
		Schema:  func(mode schema.Mode) map[string]any { return arrayOf(itemSchema(*new(T), mode, nil)) },
		Export:  func(tx *gorm.DB, _ bool) (any, error) { return list[T](tx) },
		Clear:   deleteAll(new(T)),
		Restore: restore,
	}
}

// deleteAll removes every row of the models, in order.
func deleteAll(models ...any) func(tx *gorm.DB) error {
	return func(tx *gorm.DB) error {
		for _, m := range models {
			if err := tx.Where("1 = 1").Delete(m).Error; err != nil {
				return err
			}
		}
		return nil
	}
}

// list reads a table in id order (never nil: exports show []).
func list[T any](tx *gorm.DB) ([]T, error) {
	out := make([]T, 0)
	err := tx.Order("id").Find(&out).Error
	return out, err
}

// listAs reads a table in id order and answers its rows as view shows them.
func listAs[T, V any](tx *gorm.DB, view func(row *T) V) ([]V, error) {
	rows, err := list[T](tx)
	if err != nil {
		return nil, err
	}
	out := make([]V, len(rows))
	for i := range rows {
		out[i] = view(&rows[i])
	}
	return out, nil
}

// nested exports the rows of P, each with its rows of C (those whose
// parentOf is its id, in id order, never null) as view shows them: services
// with their targets, consumers with their credentials.
func nested[P, C, V, O any](tx *gorm.DB, parentOf func(*C) int64, view func(*C) V, build func(parent *P, children []V) O) ([]O, error) {
	children, err := list[C](tx)
	if err != nil {
		return nil, err
	}
	by := map[int64][]V{}
	for i := range children {
		id := parentOf(&children[i])
		by[id] = append(by[id], view(&children[i]))
	}
	return listAs(tx, func(p *P) O {
		kids := by[idOf(p)]
		if kids == nil {
			kids = []V{}
		}
		return build(p, kids)
	})
}

func arrayOf(items map[string]any) map[string]any {
	return map[string]any{"type": "array", "items": items}
}

// itemSchema is a stored resource's schema inside a document. Input keeps
// the output-only fields (id, created_at …) as readOnly: an export is
// imported as it is, and they are ignored. nested adds child lists
// (a service's targets, a consumer's credentials).
func itemSchema(decl any, mode schema.Mode, nested map[string]any) map[string]any {
	s := schema.JSONSchema(decl, mode)
	props, _ := s["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
		s["properties"] = props
	}
	if mode == schema.Input {
		out := schema.JSONSchema(decl, schema.Output)
		for name, p := range out["properties"].(map[string]any) {
			if _, ok := props[name]; !ok {
				pm := p.(map[string]any)
				pm["readOnly"] = true
				props[name] = pm
			}
		}
	}
	for name, n := range nested {
		props[name] = n
		if mode == schema.Output {
			req, _ := s["required"].([]string)
			s["required"] = append(req, name)
		}
	}
	return s
}

// Settings.

var settingsKind = Kind{
	Name: "settings",
	Schema: func(mode schema.Mode) map[string]any {
		s := itemSchema(storage.Settings{}, mode, nil)
		if mode == schema.Input {
			return map[string]any{"anyOf": []any{s, map[string]any{"type": "null"}},
				"description": "Applied like PUT /api/v1/settings; absent or null leaves the settings as they are."}
		}
		return s
	},
	Export: func(tx *gorm.DB, _ bool) (any, error) {
		var s storage.Settings
		if err := tx.First(&s, 1).Error; err != nil {
			return nil, err
		}
		if s.TrustedProxies == nil {
			s.TrustedProxies = []string{}
		}
		return &s, nil
	},
	Restore: func(r *Restorer, raw json.RawMessage) error {
		if isNull(raw) {
			return nil
		}
		s := r.CP.DefaultSettings()
		if err := decode("settings", raw, s); err != nil {
			return err
		}
		s.ID = 1
		if err := prefix("settings", domain.CheckSettings(r.Tx, s)); err != nil {
			return err
		}
		return r.Tx.Save(s).Error
	},
}

// Services and their targets.

// exportService is a service with its targets.
type exportService struct {
	storage.Service
	Targets []storage.Target `json:"targets"`
}

var servicesKind = Kind{
	Name:   "services",
	Counts: []string{"services", "targets"},
	Schema: func(mode schema.Mode) map[string]any {
		return arrayOf(itemSchema(storage.Service{}, mode, map[string]any{"targets": arrayOf(itemSchema(storage.Target{}, mode, nil))}))
	},
	Export: func(tx *gorm.DB, _ bool) (any, error) {
		return nested(tx, func(t *storage.Target) int64 { return t.ServiceID },
			func(t *storage.Target) storage.Target { return *t },
			func(s *storage.Service, targets []storage.Target) exportService {
				return exportService{Service: *s, Targets: targets}
			})
	},
	Clear: deleteAll(&storage.Target{}, &storage.Service{}),
	Restore: func(r *Restorer, raw json.RawMessage) error {
		return eachRow(r, "services", raw, "targets", func(it item, s *storage.Service) error {
			if err := r.insert(it, "services", s); err != nil {
				return err
			}
			return eachRow(r, it.path+".targets", it.child, "", func(ti item, t *storage.Target) error {
				t.ServiceID = s.ID
				return r.create(ti.path, "targets", t)
			})
		})
	},
}

// Routes.

var routesKind = rowsKind[storage.Route]("routes", func(r *Restorer, raw json.RawMessage) error {
	// Routes are inserted in batches: at 50,000 routes one INSERT per
	// row was most of the import's time.
	batch := newBatch[storage.Route](r, "routes")
	err := eachRow(r, "routes", raw, "", func(it item, rt *storage.Route) error {
		if err := r.Ref("services", it.path+".service_id", &rt.ServiceID); err != nil {
			return err
		}
		for j := range rt.Splits {
			if err := r.Ref("services", fmt.Sprintf("%s.splits[%d].service_id", it.path, j), &rt.Splits[j].ServiceID); err != nil {
				return err
			}
		}
		// domain.CheckRoute's checks (the services exist) hold
		// already: Ref maps only to services this import created in
		// its transaction; querying each again per route doubled the
		// statements.
		return batch.add(it, *rt)
	})
	if err != nil {
		return err
	}
	return batch.flush()
})

// Stream routes.

var streamRoutesKind = rowsKind[storage.StreamRoute]("stream_routes", func(r *Restorer, raw json.RawMessage) error {
	return eachRow(r, "stream_routes", raw, "", func(it item, sr *storage.StreamRoute) error {
		if err := r.Ref("services", it.path+".service_id", &sr.ServiceID); err != nil {
			return err
		}
		if err := prefix(it.path, domain.CheckStreamRoute(r.Tx, sr)); err != nil {
			return err
		}
		return r.create(it.path, "stream_routes", sr)
	})
})

// Plugins.

var pluginsKind = Kind{
	Name:   "plugins",
	Counts: []string{"plugins"},
	Schema: func(mode schema.Mode) map[string]any { return arrayOf(itemSchema(storage.Plugin{}, mode, nil)) },
	Export: func(tx *gorm.DB, secrets bool) (any, error) {
		rows, err := list[storage.Plugin](tx)
		if err != nil || secrets {
			return rows, err
		}
		// Secret config fields (http-log credentials and headers) are
		// redacted, as for viewers; such a plugin is skipped on import.
		for i := range rows {
			rows[i].Config, _ = plugins.RedactConfig(rows[i].Type, rows[i].Config)
		}
		return rows, nil
	},
	Clear: deleteAll(&storage.Plugin{}),
	Restore: func(r *Restorer, raw json.RawMessage) error {
		return r.each("plugins", raw, "", func(it item) error {
			var head struct {
				Type   any `json:"type"`
				Config any `json:"config"`
			}
			_ = json.Unmarshal(it.fields, &head)
			if typ, ok := head.Type.(string); ok {
				if typ == "wasm" {
					cfg, _ := head.Config.(map[string]any)
					module, _ := cfg["module"].(string)
					if !r.WasmModules[module] {
						r.Skip("plugin", it.path, fmt.Sprintf("wasm plugin: its module %q is missing", module))
						return nil
					}
				}
				if _, known := plugins.Lookup(typ); !known {
					r.Skip("plugin", it.path, fmt.Sprintf("unknown plugin type %q", typ))
					return nil
				}
				raw, _ := json.Marshal(head.Config)
				if names := plugins.RedactedInConfig(typ, raw); len(names) > 0 {
					r.Skip("plugin", it.path, fmt.Sprintf("%s plugin: its secret %s was redacted (an export without secrets)", typ, names[0]))
					return nil
				}
			}
			var p storage.Plugin
			if err := decode(it.path, it.fields, &p); err != nil {
				return err
			}
			if p.ServiceID != nil {
				if err := r.Ref("services", it.path+".service_id", p.ServiceID); err != nil {
					return err
				}
			}
			if p.RouteID != nil {
				if err := r.Ref("routes", it.path+".route_id", p.RouteID); err != nil {
					return err
				}
			}
			if err := pluginapi.CheckPlugin(r.CP, r.Tx, &p); err != nil {
				// A plugin this gateway cannot run (a rate limit on a
				// store it lacks) is skipped, not refused.
				var u *controlplane.Unsupported
				if errors.As(err, &u) {
					r.Skip("plugin", it.path, fmt.Sprintf("%s plugin: %s", p.Type, u.Error()))
					return nil
				}
				return prefix(it.path, err)
			}
			return r.create(it.path, "plugins", &p)
		})
	},
}

// Consumers and their credentials.

// exportConsumer is a consumer with its credentials.
type exportConsumer struct {
	storage.Consumer
	Credentials []map[string]any `json:"credentials"`
}

// DocumentCredential is what a credential in a document has beyond the
// create endpoint's input (pluginapi.Credential, which declares the kinds'
// fields and their rules): its identity, the stored password hash in place
// of the password, and the secret fields an export without secrets left
// out.
type DocumentCredential struct {
	ID           int64     `json:"id" schema:"readonly"`
	ConsumerID   int64     `json:"consumer_id" schema:"readonly" doc:"The consumer it belongs to (on import: the consumer it is listed under)."`
	PasswordHash *string   `json:"password_hash,omitempty" schema:"minLength=1,maxLength=128" doc:"basic-auth: the bcrypt hash of the password (only with include_secrets); on import, of cost at most 12 (every failed login recomputes it)."`
	Redacted     []string  `json:"redacted,omitempty" doc:"The secret fields left out of an export without secrets; such a credential is skipped on import."`
	CreatedAt    time.Time `json:"created_at" schema:"readonly"`
}

// credentialFields are the create endpoint's input fields without its
// rules (pluginapi.Credential.Validate; see decodeCredential).
type credentialFields pluginapi.Credential

// credentialSchema describes a credential in a document.
func credentialSchema(mode schema.Mode) map[string]any {
	s := itemSchema(DocumentCredential{}, mode, nil)
	props := s["properties"].(map[string]any)
	for name, p := range schema.JSONSchema(pluginapi.Credential{}, schema.Input)["properties"].(map[string]any) {
		if name == "password" {
			continue // a document holds its hash
		}
		p := maps.Clone(p.(map[string]any))
		delete(p, "writeOnly") // in exports with include_secrets
		props[name] = p
	}
	req, _ := s["required"].([]string)
	s["required"] = append(req, "type")
	return s
}

// exportCredential is a stored credential in a document: its identity and
// its kind's fields, the secret ones only with secrets (redacted names
// those left out).
func exportCredential(cr *storage.Credential, secrets bool) map[string]any {
	out := map[string]any{"id": cr.ID, "consumer_id": cr.ConsumerID, "type": cr.Type, "created_at": cr.CreatedAt}
	k, ok := consumers.KindOf(cr.Type)
	if !ok {
		return out
	}
	c := cr.Compiled()
	secret := k.Secrets(&c)
	var redacted []string
	for _, name := range k.Fields {
		if slices.Contains(secret, name) && !secrets {
			redacted = append(redacted, name)
		} else if v := *c.Field(name); v != "" {
			out[name] = v
		}
	}
	if redacted != nil {
		out["redacted"] = redacted
	}
	return out
}

var consumersKind = Kind{
	Name:   "consumers",
	Counts: []string{"consumers", "credentials"},
	Schema: func(mode schema.Mode) map[string]any {
		return arrayOf(itemSchema(storage.Consumer{}, mode, map[string]any{"credentials": arrayOf(credentialSchema(mode))}))
	},
	Export: func(tx *gorm.DB, secrets bool) (any, error) {
		return nested(tx, func(cr *storage.Credential) int64 { return cr.ConsumerID },
			func(cr *storage.Credential) map[string]any { return exportCredential(cr, secrets) },
			func(c *storage.Consumer, creds []map[string]any) exportConsumer {
				if c.Groups == nil {
					c.Groups = []string{}
				}
				return exportConsumer{Consumer: *c, Credentials: creds}
			})
	},
	Clear: deleteAll(&storage.Credential{}, &storage.Consumer{}),
	Restore: func(r *Restorer, raw json.RawMessage) error {
		return eachRow(r, "consumers", raw, "credentials", func(it item, c *storage.Consumer) error {
			if err := prefix(it.path, pluginapi.CheckConsumer(r.Tx, c)); err != nil {
				return err
			}
			if err := r.insert(it, "consumers", c); err != nil {
				return err
			}
			return r.each(it.path+".credentials", it.child, "", func(ci item) error {
				return r.restoreCredential(ci, c)
			})
		})
	},
}
