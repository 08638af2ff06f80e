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
//
// Nothing here registers itself: the app hands the package's parts over
// explicitly (app/features.go): Table and LoadSources to the store,
// PluginRefs (the wasm plugins' module check and module_sha256) to the
// control plane, Endpoints to the admin API. Its tests are beside it (the
// size limits) and in app/tests (wasm_api_test.go, wasm_e2e_test.go)
// and app/backup (wasm_test.go), which run a real gateway.
package wasmapi

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gorm.io/gorm"

	"github.com/caddy-gateway/gateway/app/api"
	"github.com/caddy-gateway/gateway/app/controlplane"
	"github.com/caddy-gateway/gateway/internal/wasm/proxywasm"
	"github.com/caddy-gateway/gateway/internal/wasm/wat"
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

// MaxCheckTime bounds checking one module (assembling its WAT, compiling
// it, starting a VM of it): past it the upload or import is refused (400
// naming the limit). At the compile limits a module compiles in seconds
// to about a quarter of a minute of one core.
const MaxCheckTime = 30 * time.Second

// checkSlots are the module checks (WAT assembly and compilation) the
// process runs at once: one, so that uploads and imports take at most one
// core of the machine, the others waiting their turn (at most
// MaxCheckTime, then 503). A check that ran out of time keeps its slot
// until the compiler has stopped.
var checkSlots = make(chan struct{}, 1)

// checkTime is MaxCheckTime but in the tests that shorten it.
var checkTime atomic.Int64

func init() { checkTime.Store(int64(MaxCheckTime)) }

// SetCheckTime sets the time limit of a check (the tests of the limit use
// it) and returns a function restoring the previous one.
func SetCheckTime(d time.Duration) (restore func()) {
	old := checkTime.Swap(int64(d))
	return func() { checkTime.Store(old) }
}

// CheckHook, when set, is called as a module's check starts (in its
// slot) with the module's name, and what it returns when the check ends:
// the tests that run changes while a check is in flight use it.
var CheckHook atomic.Pointer[func(name string) (end func())]

// PluginType is the plugin type that references modules.
const PluginType = "wasm"

// PluginRefs is what the module resource gives wasm plugins, whose
// config.module names a module: the check of every plugin write (the
// module must exist) and the handler's module_sha256. The app hands it to
// the control plane explicitly (app/features.go), with LoadSources for
// the store.
var PluginRefs = controlplane.PluginRefs{Check: checkPluginModule, Internals: moduleInternals}

const description = "A module is a proxy-wasm plugin module (ABI 0.2.0/0.2.1) that wasm plugins reference by name (config.module). " +
	"Input: name (required, 1..64 characters of a-z 0-9 - _, unique) and either wasm_base64 (the binary module, standard base64; whitespace is ignored) " +
	"or wat (WebAssembly text, assembled by the gateway); one of them must be non-empty, and when both are given wasm_base64 is used. " +
	"The binary module may be at most 16 MiB (admin request bodies are limited to 20 MiB, so a base64 upload is limited to about 15 MiB). " +
	"The module is compiled and its exports are checked against the plugin ABI before it is stored; errors are 400 naming the field " +
	"(an assembler error carries its line:column). Answers never contain the module's bytes: sha256 is the hex SHA-256 of the binary module. " +
	"Before anything is decoded or compiled, every count the module declares is checked against these limits (400 naming the limit): " +
	"10000 function types of at most 1000 parameters and 1000 results each; 10000 imports; 100000 functions (imported and defined); " +
	"50000 locals per function and 1000000 in all functions; 10000 globals; 16 tables of at most 100000 elements (initial and maximum size); " +
	"one memory of at most 1024 pages of 64 KiB initially; 10000 exports; 10000 element segments holding 100000 elements in all; " +
	"100000 data segments; 1000 custom sections; 500000 entries (function and local names) in the name section. " +
	"Sections must be in order, not repeated, and hold exactly what they declare (a truncated module or overlapping sections are refused). " +
	"Nesting is bounded by the compile limits (branches per function). " +
	"Checking one module (assembling, compiling, starting it) may take at most 30 s: past it the upload is 400 naming the limit. " +
	"The gateway checks one module at a time; an upload that cannot start its check within 30 s is 503 (try again later). " +
	"Changes to other resources do not wait for a check."

// Module is the one declaration of a WASM module in the admin API: the
// body of POST /api/v1/wasm-modules (name, and wasm_base64 or wat; the
// read-only fields are ignored), its answers (View: never the module's
// bytes) and an item of export documents (Exported: wasm_base64 only with
// secrets), which an import takes back with the rules of an upload.
type Module struct {
	ID         int64     `json:"id" schema:"readonly"`
	Name       string    `json:"name" schema:"required,minLength=1,maxLength=64" doc:"Unique; 1..64 characters of a-z, 0-9, - and _."`
	SizeBytes  int64     `json:"size_bytes" schema:"readonly" doc:"Size of the binary module."`
	SHA256     string    `json:"sha256" schema:"readonly" doc:"Hex SHA-256 of the binary module."`
	WasmBase64 *string   `json:"wasm_base64,omitempty" schema:"writeonly,text,maxLength=20971520" doc:"The binary module, base64 (standard alphabet); takes precedence over wat. At most 16 MiB decoded; compiling must stay within the gateway's compile limits: at most 20000 branches (block, loop, if, else, br, br_if and each br_table label) in one function, and at most 2000000000 for the sum over functions of branches × (branches + instructions) (the compiler's time grows with the square of a function's branches; SDK-built modules are orders of magnitude below both). Never returned (export documents carry it only with include_secrets; without it an import skips the module and the wasm plugins that use it)."`
	WAT        *string   `json:"wat,omitempty" schema:"writeonly,text,maxLength=4194304" doc:"The module in WebAssembly text format (at most 4 MiB of text), with the compile limits of wasm_base64; used when wasm_base64 is absent or empty. Never returned (export documents carry the binary as wasm_base64; an import takes wat too, as an upload does)."`
	CreatedAt  time.Time `json:"created_at" schema:"readonly"`
}

var nameRe = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// Validate implements schema.Validator: the rules of an upload.
func (in *Module) Validate() error {
	if !nameRe.MatchString(in.Name) {
		return schema.Errorf("name", "must be 1..64 characters of a-z, 0-9, - and _")
	}
	if !in.HasModule() {
		return schema.Errorf("wasm_base64", "one of wasm_base64 and wat is required")
	}
	return nil
}

// HasModule tells whether the input carries the module (a non-empty
// wasm_base64 or wat): an export document's item has it only with
// secrets.
func (in *Module) HasModule() bool {
	return (in.WasmBase64 != nil && *in.WasmBase64 != "") || (in.WAT != nil && *in.WAT != "")
}

// View is the answer of a stored module: its metadata, never its bytes.
func View(m *Row) Module {
	return Module{ID: m.ID, Name: m.Name, SizeBytes: m.SizeBytes, SHA256: m.SHA256, CreatedAt: m.CreatedAt}
}

// Exported is a row as an export document shows it: its view, with the
// binary module (wasm_base64) when secrets is set (the row must then hold
// its bytes).
func Exported(m *Row, secrets bool) Module {
	v := View(m)
	if secrets {
		b := base64.StdEncoding.EncodeToString(m.Wasm)
		v.WasmBase64 = &b
	}
	return v
}

// Endpoints are the wasm module endpoints.
func Endpoints() []*api.Endpoint {
	return []*api.Endpoint{
		{Method: "GET", Path: "/api/v1/wasm-modules", Role: api.RoleViewer, Tag: "wasm-modules",
			Summary: "List WASM modules (metadata only, in id order)", Description: description,
			Response: Module{}, ResponseList: true, Handle: list},
		{Method: "POST", Path: "/api/v1/wasm-modules", Role: api.RoleEditor, Tag: "wasm-modules",
			Summary: "Upload a WASM module (binary as base64, or WAT)", Description: description,
			Body: Module{}, Response: Module{}, Statuses: []int{400, 503}, Handle: create},
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
	in := new(Module)
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
//
// Assembling and checking take a slot of the process's checks first and
// are bounded by the check's time limit (a request that leaves gives up);
// callers must not hold the control plane's lock, so that other changes
// go on while a module compiles.
func (in *Module) Row(ctx context.Context) (*Row, error) {
	limit := time.Duration(checkTime.Load())
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	select {
	case checkSlots <- struct{}{}:
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, &api.APIError{Status: http.StatusServiceUnavailable,
				Msg: fmt.Sprintf("other modules were being checked for %s: try again later", limit)}
		}
		return nil, &api.APIError{Status: 499, Msg: "the client left while its module waited to be checked"}
	}
	type result struct {
		row *Row
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer func() { <-checkSlots }()
		if f := CheckHook.Load(); f != nil {
			defer (*f)(in.Name)()
		}
		row, err := in.check(ctx)
		done <- result{row, err}
	}()
	select {
	case r := <-done:
		return r.row, r.err
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, schema.Errorf(in.field(), "checking the module (assembling, compiling and starting it) took longer than the limit of %s: make it smaller or split large functions", limit)
		}
		return nil, &api.APIError{Status: 499, Msg: "the client left while its module was checked"}
	}
}

// field is the input field the module comes from.
func (in *Module) field() string {
	if in.WasmBase64 != nil && *in.WasmBase64 != "" {
		return "wasm_base64"
	}
	return "wat"
}

// check assembles and checks the module, in a check's slot.
func (in *Module) check(ctx context.Context) (*Row, error) {
	bin, field, err := Binary(in)
	if err != nil {
		return nil, err
	}
	if err := proxywasm.CheckModule(ctx, bin); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, schema.Errorf(field, "%s", err.Error())
	}
	sum := sha256.Sum256(bin)
	return &Row{Name: in.Name, SizeBytes: int64(len(bin)), SHA256: hex.EncodeToString(sum[:]), Wasm: bin}, nil
}

// Binary is the input's binary module and the field it came from.
func Binary(in *Module) (bin []byte, field string, err error) {
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
// LoadSources for the same snapshot).
func moduleInternals(snap *storage.Snapshot, p *storage.Plugin) (map[string]any, error) {
	name := moduleName(p.Config)
	for _, m := range Table.Rows(snap) {
		if m.Name == name {
			return map[string]any{"module_sha256": m.SHA256}, nil
		}
	}
	return nil, schema.Errorf("config.module", "plugin %d: no WASM module named %q", p.ID, name)
}

// held are the registry keys LoadSources has put, so that it can drop
// those the configuration no longer uses.
var held = struct {
	sync.Mutex
	m map[string]bool
}{m: map[string]bool{}}

// LoadSources puts the bytes of every module an enabled wasm plugin of the
// snapshot references into the runtime's source registry, and drops the
// ones it put earlier that no plugin references any more. The registry is
// content-addressed: a module whose bytes it already holds is not read from
// the store again; one dropped too early (a mutation rolled back after its
// snapshot was read) is simply read again by the next compile, and
// handlers already provisioned keep their compiled module.
func LoadSources(db *gorm.DB, snap *storage.Snapshot) error {
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
