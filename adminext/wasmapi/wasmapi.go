// Package wasmapi is the WASM module resource of the admin API:
//
//	GET    /api/v1/wasm-modules
//	POST   /api/v1/wasm-modules
//	DELETE /api/v1/wasm-modules/{id}
//
// A module is an uploaded proxy-wasm binary (or WAT text, assembled here),
// validated by the plugin runtime before it is stored. wasm plugins name it
// in config.module. Its bytes live in the store only: on every compile the
// referenced modules are handed to the runtime's content-addressed source
// registry and the plugin's handler config carries just their SHA-256
// (module_sha256), so Caddy's JSON config never holds module bytes.
package wasmapi

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/caddy-gateway/gateway/adminext/api"
	"github.com/caddy-gateway/gateway/adminext/compiler"
	"github.com/caddy-gateway/gateway/adminext/pluginapi"
	"github.com/caddy-gateway/gateway/modules/wasm/proxywasm"
	"github.com/caddy-gateway/gateway/modules/wasm/wat"
	"github.com/caddy-gateway/gateway/schema"
	"github.com/caddy-gateway/gateway/storage"
)

// MaxModuleBytes is the size limit of a binary module (after base64
// decoding or WAT assembly).
const MaxModuleBytes = 16 << 20

// MaxWATBytes is the size limit of WAT text: assembling takes memory in
// proportion to the text (tens of bytes per byte in the worst case), so the
// text format is for small modules; binaries go up to MaxModuleBytes.
const MaxWATBytes = 4 << 20

// PluginType is the plugin type that references modules.
const PluginType = "wasm"

func init() {
	pluginapi.RegisterConfigCheck(PluginType, checkPluginModule)
	compiler.RegisterTypeInternals(PluginType, moduleInternals)
	storage.RegisterSnapshotLoader(loadSources)
}

const description = "A module is a proxy-wasm plugin module (ABI 0.2.0/0.2.1) that wasm plugins reference by name (config.module). " +
	"Input: name (required, 1..64 characters of a-z 0-9 - _, unique) and either wasm_base64 (the binary module, standard base64; whitespace is ignored) " +
	"or wat (WebAssembly text, assembled by the gateway); one of them must be non-empty, and when both are given wasm_base64 is used. " +
	"The binary module may be at most 16 MiB (admin request bodies are limited to 20 MiB, so a base64 upload is limited to about 15 MiB). " +
	"The module is compiled and its exports are checked against the plugin ABI before it is stored; errors are 400 naming the field " +
	"(an assembler error carries its line:column). Answers never contain the module's bytes: sha256 is the hex SHA-256 of the binary module."

// ModuleInput is the body of POST /api/v1/wasm-modules.
type ModuleInput struct {
	Name       string  `json:"name" schema:"required,minLength=1,maxLength=64" doc:"Unique; 1..64 characters of a-z, 0-9, - and _."`
	WasmBase64 *string `json:"wasm_base64" schema:"writeonly,text,maxLength=20971520" doc:"The binary module, base64 (standard alphabet); takes precedence over wat."`
	WAT        *string `json:"wat" schema:"writeonly,text,maxLength=20971520" doc:"The module in WebAssembly text format (at most 4 MiB of text); used when wasm_base64 is absent or empty."`
}

var nameRe = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// Validate implements schema.Validator.
func (in *ModuleInput) Validate() error {
	if !nameRe.MatchString(in.Name) {
		return schema.Errorf("name", "must be 1..64 characters of a-z, 0-9, - and _")
	}
	if (in.WasmBase64 == nil || *in.WasmBase64 == "") && (in.WAT == nil || *in.WAT == "") {
		return schema.Errorf("wasm_base64", "one of wasm_base64 and wat is required")
	}
	return nil
}

// Module is a module as answers show it: never its bytes.
type Module struct {
	ID        int64     `json:"id"`
	Name      string    `json:"name"`
	SizeBytes int64     `json:"size_bytes" doc:"Size of the binary module."`
	SHA256    string    `json:"sha256" doc:"Hex SHA-256 of the binary module."`
	CreatedAt time.Time `json:"created_at"`
}

// View is the answer of a stored module.
func View(m *Row) Module {
	return Module{ID: m.ID, Name: m.Name, SizeBytes: m.SizeBytes, SHA256: m.SHA256, CreatedAt: m.CreatedAt}
}

// Endpoints are the wasm module endpoints.
func Endpoints() []*api.Endpoint {
	return []*api.Endpoint{
		{Method: "GET", Path: "/api/v1/wasm-modules", Role: api.RoleViewer, Tag: "wasm-modules",
			Summary: "List WASM modules (metadata only, in id order)", Description: description,
			Response: Module{}, ResponseList: true, Handle: list},
		{Method: "POST", Path: "/api/v1/wasm-modules", Role: api.RoleEditor, Tag: "wasm-modules",
			Summary: "Upload a WASM module (binary as base64, or WAT)", Description: description,
			Body: ModuleInput{}, Response: Module{}, Statuses: []int{400}, Handle: create},
		{Method: "DELETE", Path: "/api/v1/wasm-modules/{id}", Role: api.RoleEditor, Tag: "wasm-modules",
			Summary:     "Delete a WASM module",
			Description: "400 while a wasm plugin (enabled or not) references the module by name; the message lists those plugins' ids.",
			Response:    api.Deleted{}, Statuses: []int{400, 404}, Handle: remove},
	}
}

func list(c *api.Call) (any, error) {
	var rows []Row
	if err := c.CP.Store().DB.WithContext(c.Ctx()).Omit("wasm").Order("id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("listing wasm modules: %w", err)
	}
	out := make([]Module, 0, len(rows))
	for i := range rows {
		out = append(out, View(&rows[i]))
	}
	return out, nil
}

func create(c *api.Call) (any, error) {
	in := new(ModuleInput)
	if err := c.Decode(in); err != nil {
		return nil, err
	}
	row, err := in.Row(c.Ctx())
	if err != nil {
		return nil, err
	}
	err = api.Write(c, row, func(tx *gorm.DB, m *Row) error { return checkUnique(tx, m.Name) }, (*gorm.DB).Create)
	if err != nil {
		if storage.IsConflict(err) {
			return nil, schema.Errorf("name", "a module named %q exists", row.Name)
		}
		return nil, err
	}
	return View(row), nil
}

// Row validates an input (decoded and Validate'd) into a module row: the
// binary from wasm_base64 or assembled from wat, within the size limit,
// accepted by the plugin runtime. Errors are 400 naming the field.
func (in *ModuleInput) Row(ctx context.Context) (*Row, error) {
	bin, field, err := Binary(in)
	if err != nil {
		return nil, err
	}
	if err := proxywasm.CheckModule(ctx, bin); err != nil {
		return nil, schema.Errorf(field, "%s", err.Error())
	}
	sum := sha256.Sum256(bin)
	return &Row{Name: in.Name, SizeBytes: int64(len(bin)), SHA256: hex.EncodeToString(sum[:]), Wasm: bin}, nil
}

// Binary is the input's binary module and the field it came from.
func Binary(in *ModuleInput) (bin []byte, field string, err error) {
	if in.WasmBase64 != nil && *in.WasmBase64 != "" {
		field = "wasm_base64"
		s := strings.Map(func(r rune) rune {
			if r == ' ' || r == '\n' || r == '\r' || r == '\t' {
				return -1
			}
			return r
		}, *in.WasmBase64)
		if base64.StdEncoding.DecodedLen(len(s)) > MaxModuleBytes+2 {
			return nil, field, tooLarge(field)
		}
		bin, err = base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, field, schema.Errorf(field, "is not valid base64: %s", err.Error())
		}
	} else {
		field = "wat"
		if len(*in.WAT) > MaxWATBytes {
			return nil, field, schema.Errorf(field, "is larger than %d MiB of text; upload a large module as wasm_base64", MaxWATBytes>>20)
		}
		bin, err = wat.Compile([]byte(*in.WAT))
		if err != nil {
			return nil, field, schema.Errorf(field, "%s", err.Error())
		}
	}
	if len(bin) > MaxModuleBytes {
		return nil, field, tooLarge(field)
	}
	if len(bin) == 0 {
		return nil, field, schema.Errorf(field, "the module is empty")
	}
	return bin, field, nil
}

func tooLarge(field string) error {
	return schema.Errorf(field, "the module is larger than 16 MiB")
}

// checkUnique answers 400 when a module of that name exists.
func checkUnique(tx *gorm.DB, name string) error {
	var n int64
	if err := tx.Model(&Row{}).Where("name = ?", name).Count(&n).Error; err != nil {
		return err
	}
	if n > 0 {
		return schema.Errorf("name", "a module named %q exists", name)
	}
	return nil
}

func remove(c *api.Call) (any, error) {
	id, err := c.ID("id")
	if err != nil {
		return nil, err
	}
	err = c.CP.Mutate(c.Ctx(), func(tx *gorm.DB) error {
		var m Row
		if err := tx.Omit("wasm").First(&m, id).Error; err != nil {
			if storage.IsNotFound(err) {
				return api.NotFound(fmt.Sprintf("wasm module %d not found", id))
			}
			return err
		}
		users, err := ReferencingPlugins(tx, m.Name)
		if err != nil {
			return err
		}
		if len(users) > 0 {
			ids := make([]string, len(users))
			for i, u := range users {
				ids[i] = strconv.FormatInt(u, 10)
			}
			noun := "plugins"
			if len(ids) == 1 {
				noun = "plugin"
			}
			return api.BadRequest(fmt.Sprintf("module %q is referenced by %s %s: delete them or point them at another module first", m.Name, noun, strings.Join(ids, ", ")))
		}
		return tx.Delete(&Row{}, id).Error
	})
	if err != nil {
		return nil, err
	}
	return api.Deleted{Deleted: true}, nil
}

// ReferencingPlugins are the ids of the wasm plugins (enabled or not) whose
// config names the module, in id order.
func ReferencingPlugins(tx *gorm.DB, name string) ([]int64, error) {
	var rows []storage.Plugin
	if err := tx.Where("type = ?", PluginType).Order("id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("reading wasm plugins: %w", err)
	}
	var out []int64
	for _, p := range rows {
		if moduleName(p.Config) == name {
			out = append(out, p.ID)
		}
	}
	return out, nil
}

// moduleName is config.module of a wasm plugin's config ("" when absent).
func moduleName(config json.RawMessage) string {
	var c struct {
		Module string `json:"module"`
	}
	_ = json.Unmarshal(config, &c)
	return c.Module
}

// checkPluginModule is the wasm plugin type's stored-reference check: its
// module must exist.
func checkPluginModule(tx *gorm.DB, config json.RawMessage) error {
	name := moduleName(config)
	var n int64
	if err := tx.Model(&Row{}).Where("name = ?", name).Count(&n).Error; err != nil {
		return err
	}
	if n == 0 {
		return schema.Errorf("config.module", "no WASM module named %q (upload it first: POST /api/v1/wasm-modules)", name)
	}
	return nil
}

// moduleInternals gives a wasm plugin's handler the SHA-256 of its module,
// the key of the bytes in the runtime's source registry (filled by
// loadSources for the same snapshot).
func moduleInternals(snap *storage.Snapshot, p *storage.Plugin) (map[string]any, error) {
	name := moduleName(p.Config)
	for _, m := range Table.Rows(snap) {
		if m.Name == name {
			return map[string]any{"module_sha256": m.SHA256}, nil
		}
	}
	return nil, schema.Errorf("config.module", "plugin %d: no WASM module named %q", p.ID, name)
}

// held are the registry keys loadSources has put, so that it can drop
// those the configuration no longer uses.
var held = struct {
	sync.Mutex
	m map[string]bool
}{m: map[string]bool{}}

// loadSources puts the bytes of every module an enabled wasm plugin of the
// snapshot references into the runtime's source registry, and drops the
// ones it put earlier that no plugin references any more. The registry is
// content-addressed: a module whose bytes it already holds is not read from
// the store again; one dropped too early (a mutation rolled back after its
// snapshot was read) is simply read again by the next compile, and
// handlers already provisioned keep their compiled module.
func loadSources(db *gorm.DB, snap *storage.Snapshot) error {
	held.Lock()
	defer held.Unlock()
	byName := map[string]Row{}
	for _, m := range Table.Rows(snap) {
		byName[m.Name] = m
	}
	used := map[string]bool{}
	need := map[int64]string{}
	for _, p := range snap.Plugins {
		if p.Type != PluginType || !p.Enabled {
			continue
		}
		m, ok := byName[moduleName(p.Config)]
		if !ok {
			continue // moduleInternals reports it if the plugin is compiled
		}
		used[m.SHA256] = true
		if _, ok := proxywasm.Source(m.SHA256); !ok {
			need[m.ID] = m.SHA256
		}
	}
	ids := make([]int64, 0, len(need))
	for id := range need {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		var m Row
		if err := db.First(&m, id).Error; err != nil {
			return fmt.Errorf("reading wasm module %d: %w", id, err)
		}
		if got := proxywasm.PutSource(m.Wasm); got != need[id] {
			proxywasm.DropSource(got)
			return fmt.Errorf("wasm module %q: its stored bytes do not match its sha256", m.Name)
		}
		held.m[need[id]] = true
	}
	for sha := range held.m {
		if !used[sha] {
			proxywasm.DropSource(sha)
			delete(held.m, sha)
		}
	}
	return nil
}
