package backup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"

	"golang.org/x/crypto/bcrypt"
	"gorm.io/gorm"

	"github.com/caddy-gateway/gateway/app/api"
	"github.com/caddy-gateway/gateway/app/controlplane"
	"github.com/caddy-gateway/gateway/app/pluginapi"
	"github.com/caddy-gateway/gateway/internal/consumers"
	"github.com/caddy-gateway/gateway/schema"
	"github.com/caddy-gateway/gateway/storage"
)

// Restorer is one import: its transaction, the ids it assigned and what it
// restored or skipped.
type Restorer struct {
	Tx *gorm.DB
	CP *controlplane.ControlPlane
	// WasmModules are the names of the WASM modules the import restored
	// (a wasm plugin whose module is not among them is skipped).
	WasmModules map[string]bool

	prepared map[string]any             // item path → what Kind.Prepare made of it
	ids      map[string]map[int64]int64 // kind → document id → new id
	restored map[string]int
	skipped  []Skipped
}

// newRestorer returns a restorer without its transaction (Tx, set once
// prepare has run).
func newRestorer(cp *controlplane.ControlPlane) *Restorer {
	r := &Restorer{CP: cp, WasmModules: map[string]bool{}, prepared: map[string]any{}, ids: map[string]map[int64]int64{}, restored: map[string]int{}}
	for _, k := range kinds {
		for _, n := range k.Counts {
			r.restored[n] = 0
		}
	}
	return r
}

// prepare runs the kinds' Prepare, before the lock and the transaction.
func (r *Restorer) prepare(ctx context.Context, doc map[string]json.RawMessage) error {
	for _, k := range kinds {
		if k.Prepare != nil {
			if err := k.Prepare(ctx, r, doc[k.Name]); err != nil {
				return err
			}
		}
	}
	return nil
}

// run replaces the stored configuration by the document's (in r.Tx).
func (r *Restorer) run(doc map[string]json.RawMessage) error {
	for i := len(kinds) - 1; i >= 0; i-- {
		if kinds[i].Clear != nil {
			if err := kinds[i].Clear(r.Tx); err != nil {
				return fmt.Errorf("clearing %s: %w", kinds[i].Name, err)
			}
		}
	}
	for _, k := range kinds {
		if err := k.Restore(r, doc[k.Name]); err != nil {
			return err
		}
	}
	return nil
}

func (r *Restorer) report() *Report {
	skipped := r.skipped
	if skipped == nil {
		skipped = []Skipped{}
	}
	return &Report{Restored: r.restored, Skipped: skipped}
}

// Skip records an item that is not restored.
func (r *Restorer) Skip(kind, ref, reason string) {
	r.skipped = append(r.skipped, Skipped{Kind: kind, Ref: ref, Reason: reason})
}

// Map records the new id of a document item (items without an id cannot be
// referenced; an id used twice within a kind is 400).
func (r *Restorer) Map(kind string, it item, newID int64) error {
	if it.id == 0 {
		return nil
	}
	m := r.ids[kind]
	if m == nil {
		m = map[int64]int64{}
		r.ids[kind] = m
	}
	if _, dup := m[it.id]; dup {
		return schema.Errorf(it.path+".id", "%d is used by another item of %s", it.id, kind)
	}
	m[it.id] = newID
	return nil
}

// Ref replaces *id, a reference to a document id of kind, with the item's
// new id (400 naming field when the document has no such item).
func (r *Restorer) Ref(kind, field string, id *int64) error {
	newID, ok := r.ids[kind][*id]
	if !ok {
		return schema.Errorf(field, "%d is not the id of an item of %s in the document", *id, kind)
	}
	*id = newID
	return nil
}

// create inserts a new row (a fresh id) and counts it in the report's
// counter.
func (r *Restorer) create(path, counter string, v any) error {
	if err := r.Tx.Create(v).Error; err != nil {
		if storage.IsConflict(err) {
			return api.BadRequest(path + ": conflicts with another item (a unique value is used twice)")
		}
		if storage.IsForeignKey(err) {
			return api.BadRequest(path + ": references something that does not exist")
		}
		return fmt.Errorf("storing %s: %w", path, err)
	}
	r.restored[counter]++
	return nil
}

// insert creates the row of a document item and maps the item's id to the
// row's new one (a parent that the items after it reference).
func (r *Restorer) insert(it item, kind string, row any) error {
	if err := r.create(it.path, kind, row); err != nil {
		return err
	}
	return r.Map(kind, it, idOf(row))
}

// batchSize is the number of rows of one batched INSERT (13 columns a
// route: far under SQLite's 32,766 and PostgreSQL's 65,535 parameters).
const batchSize = 1000

// batch inserts the rows of one kind batchSize at a time and then maps
// their document ids to the new ones. A batch the database refuses is
// inserted again row by row after a savepoint, so that the error names
// the item, as a single create does.
type batch[T any] struct {
	r     *Restorer
	kind  string
	items []item
	rows  []T
}

func newBatch[T any](r *Restorer, kind string) *batch[T] {
	return &batch[T]{r: r, kind: kind}
}

func (b *batch[T]) add(it item, row T) error {
	b.items = append(b.items, it)
	b.rows = append(b.rows, row)
	if len(b.rows) >= batchSize {
		return b.flush()
	}
	return nil
}

func (b *batch[T]) flush() error {
	if len(b.rows) == 0 {
		return nil
	}
	tx := b.r.Tx
	if err := tx.SavePoint("import_batch").Error; err != nil {
		return fmt.Errorf("storing %s: %w", b.kind, err)
	}
	if err := tx.Create(&b.rows).Error; err != nil {
		if err := tx.RollbackTo("import_batch").Error; err != nil {
			return fmt.Errorf("storing %s: %w", b.kind, err)
		}
		for i := range b.rows {
			setID(&b.rows[i], 0)
			if err := b.r.create(b.items[i].path, b.kind, &b.rows[i]); err != nil {
				return err
			}
		}
	} else {
		b.r.restored[b.kind] += len(b.rows)
	}
	for i := range b.rows {
		if err := b.r.Map(b.kind, b.items[i], idOf(&b.rows[i])); err != nil {
			return err
		}
	}
	b.items, b.rows = b.items[:0], b.rows[:0]
	return nil
}

// idOf is the id GORM gave a created row (a pointer to a model).
func idOf(row any) int64 {
	return reflect.ValueOf(row).Elem().FieldByName("ID").Int()
}

func setID(row any, id int64) {
	reflect.ValueOf(row).Elem().FieldByName("ID").SetInt(id)
}

// item is one element of a document list.
type item struct {
	path   string          // e.g. routes[2]
	id     int64           // its id in the document (0: none)
	fields json.RawMessage // the object without the nested list
	child  json.RawMessage // the nested list (targets, credentials)
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// eachRow calls fn for every item of the list raw (see each), decoded as
// a T by its declaration.
func eachRow[T any](r *Restorer, path string, raw json.RawMessage, nested string, fn func(it item, row *T) error) error {
	return r.each(path, raw, nested, func(it item) error {
		row := new(T)
		if err := decode(it.path, it.fields, row); err != nil {
			return err
		}
		return fn(it, row)
	})
}

// each calls fn for every item of the list raw (absent or null: none);
// nested names the item's child list, split off before decoding.
func (r *Restorer) each(path string, raw json.RawMessage, nested string, fn func(it item) error) error {
	if isNull(raw) {
		return nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return schema.Errorf(path, "must be an array")
	}
	for i, el := range list {
		it := item{path: fmt.Sprintf("%s[%d]", path, i)}
		if nested == "" {
			// Nothing to split off: the item is decoded as it is, and
			// only its id is read here (a map and a re-encoding per item
			// cost a tenth of a 50,000-route import).
			var probe struct {
				ID json.RawMessage `json:"id"`
			}
			if t := bytes.TrimSpace(el); len(t) == 0 || t[0] != '{' || json.Unmarshal(t, &probe) != nil {
				return schema.Errorf(it.path, "must be an object")
			}
			if err := it.readID(probe.ID); err != nil {
				return err
			}
			it.fields = el
		} else {
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(el, &obj); err != nil || obj == nil {
				return schema.Errorf(it.path, "must be an object")
			}
			if err := it.readID(obj["id"]); err != nil {
				return err
			}
			it.child = obj[nested]
			delete(obj, nested)
			it.fields, _ = json.Marshal(obj)
		}
		if err := fn(it); err != nil {
			return err
		}
	}
	return nil
}

// readID takes the item's document id from v (absent or null: none).
func (it *item) readID(v json.RawMessage) error {
	if len(v) == 0 || isNull(v) {
		return nil
	}
	if err := json.Unmarshal(v, &it.id); err != nil || it.id < 1 {
		return schema.Errorf(it.path+".id", "must be a positive integer")
	}
	return nil
}

// decode reads an item with its resource's declaration: defaults, strict
// fields, the tag rules and Validate, exactly as its endpoint does; errors
// name the item ("routes[2].paths[0]: …").
func decode(path string, raw json.RawMessage, dst any) error {
	return prefix(path, schema.Decode(raw, dst))
}

var fieldMsg = regexp.MustCompile(`^[A-Za-z0-9_.\[\]-]+: `)

// prefix puts the item's path in front of a validation error.
func prefix(path string, err error) error {
	if err == nil {
		return nil
	}
	var fe *schema.FieldError
	if errors.As(err, &fe) {
		if fe.Field == "" {
			return schema.Errorf(path, "%s", fe.Msg)
		}
		return schema.Prefix(path, err)
	}
	var ae *api.APIError
	if errors.As(err, &ae) && ae.Status == 400 {
		if fieldMsg.MatchString(ae.Msg) {
			return api.BadRequest(path + "." + ae.Msg)
		}
		return api.BadRequest(path + ": " + ae.Msg)
	}
	return err
}

// maxHashCost is the highest bcrypt cost of an imported basic-auth
// password hash. The basic-auth plugin compares every login attempt with
// the hash and caches only successes, so the cost is what any client may
// make the gateway compute per request: the API hashes with cost 10
// (bcrypt.DefaultCost), and each step beyond doubles the work (cost 31,
// which bcrypt accepts, is days of a core per wrong password). 12 leaves
// room for hashes made elsewhere.
const maxHashCost = 12

// restoreCredential restores one credential of consumer c, validated as
// POST /api/v1/consumers/{id}/credentials validates its input (the stored
// password hash stands in for the password). One whose secret is missing
// (an export without secrets) is skipped.
func (r *Restorer) restoreCredential(it item, owner *storage.Consumer) error {
	doc, in, err := decodeCredential(it)
	if err != nil {
		return err
	}
	label := fmt.Sprintf("%s credential of consumer %q", in.Type, owner.Username)
	if len(doc.Redacted) > 0 {
		r.Skip("credential", it.path, fmt.Sprintf("%s: its secret (%s) was redacted (an export without secrets)", label, doc.Redacted[0]))
		return nil
	}
	k, _ := consumers.KindOf(in.Type)
	c := in.Compiled()
	if doc.PasswordHash != nil {
		c.PasswordHash = *doc.PasswordHash
	}
	if k.Normalize != nil {
		k.Normalize(&c) // the secrets of a jwt credential depend on its algorithm
	}
	for _, name := range k.Secrets(&c) {
		// An absent generated key (a document written by hand: an export
		// names a left-out key in redacted) is generated below, as the
		// create endpoint does.
		if *c.Field(name) == "" && !(k.Generated && name == k.Unique) {
			r.Skip("credential", it.path, fmt.Sprintf("%s: it has no %s (redacted or left out), so it cannot work", label, name))
			return nil
		}
	}
	if doc.PasswordHash != nil && !slices.Contains(k.Fields, "password_hash") {
		return schema.Errorf(it.path+".password_hash", "does not apply to %s credentials", in.Type)
	}
	// The create endpoint's rules, on its own input declaration.
	if doc.PasswordHash != nil {
		placeholder := "x"
		in.Password = &placeholder
	}
	if err := prefix(it.path, schema.Check(&in)); err != nil {
		return err
	}
	if doc.PasswordHash != nil {
		cost, err := bcrypt.Cost([]byte(*doc.PasswordHash))
		if err != nil {
			return schema.Errorf(it.path+".password_hash", "must be a bcrypt hash")
		}
		if cost > maxHashCost {
			return schema.Errorf(it.path+".password_hash", "must be a bcrypt hash of cost at most %d (this one has cost %d)", maxHashCost, cost)
		}
	}
	// c is the input as Validate checked it: normalized above (the kind's
	// defaults), with the document's password hash.
	if err := pluginapi.Generate(k, &c); err != nil {
		return err
	}
	cr := storage.CredentialRow(owner.ID, c)
	if err := prefix(it.path, pluginapi.CheckCredentialUnique(r.Tx, cr)); err != nil {
		return err
	}
	return r.create(it.path, "credentials", cr)
}

// decodeCredential decodes a credential of a document: its own fields
// (DocumentCredential) and the create endpoint's input, each strictly by its
// declaration's tags. The input's rules (its Validate) are left to the
// caller: a credential whose secret is missing is skipped, not refused.
func decodeCredential(it item) (DocumentCredential, pluginapi.Credential, error) {
	var doc DocumentCredential
	var in credentialFields // pluginapi.Credential without its Validate
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(it.fields, &fields); err != nil {
		return doc, pluginapi.Credential(in), schema.Errorf(it.path, "must be an object")
	}
	own := map[string]json.RawMessage{}
	for name := range schema.FieldIndex(reflect.TypeFor[DocumentCredential]()) {
		if v, ok := fields[name]; ok {
			own[name] = v
			delete(fields, name)
		}
	}
	if _, ok := fields["password"]; ok {
		return doc, pluginapi.Credential(in), schema.Errorf(it.path+".password", "unknown field (a document holds password_hash)")
	}
	ownJSON, _ := json.Marshal(own)
	inJSON, _ := json.Marshal(fields)
	err := decode(it.path, ownJSON, &doc)
	if err == nil {
		err = decode(it.path, inJSON, &in)
	}
	return doc, pluginapi.Credential(in), err
}
