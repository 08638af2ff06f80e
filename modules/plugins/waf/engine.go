package waf

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	coreruleset "github.com/corazawaf/coraza-coreruleset/v4"
	"github.com/corazawaf/coraza/v3"
)

// engine is one compiled rule set: the CRS with one config's settings,
// exclusions and directives. Compiling takes a few hundred milliseconds of
// CPU and tens of megabytes, so it happens once per distinct config.
type engine struct {
	waf coraza.WAF
	key string // configKey of the config it was compiled for
}

// Destruct implements caddy.Destructor: the last config using the rule set
// released it. It is kept among the recently released ones (a config
// changed back, or validated and loaded again, compiles nothing).
func (e *engine) Destruct() error {
	keepRecent(e)
	return nil
}

var (
	// engines are the rule sets of the configs that run (or are being
	// loaded), keyed by the hash of the config (configKey): a reload
	// whose waf config did not change shares the running rule set.
	engines = caddy.NewUsagePool()

	// recent holds rule sets no config uses: compiled by a validation
	// (ValidateInput) for the load that follows, or released by the last
	// config that used them. At most maxRecent; the oldest is dropped.
	recentMu sync.Mutex
	recent   []recentEngine

	// compileMu lets one compilation run at a time: an editor sending
	// distinct configs in parallel costs one core, not all of them.
	compileMu sync.Mutex
)

const maxRecent = 4

// compilations counts the rule sets compiled by the process.
var compilations atomic.Int64

// Compilations is the number of rule sets the process compiled: a config
// change that leaves every waf config as it was compiles none.
func Compilations() int64 { return compilations.Load() }

type recentEngine struct {
	key string
	e   *engine
}

// keepRecent adds e to the recent rule sets, dropping the oldest beyond
// maxRecent.
func keepRecent(e *engine) {
	recentMu.Lock()
	defer recentMu.Unlock()
	recent = append(recent, recentEngine{key: e.key, e: e})
	for len(recent) > maxRecent {
		closeEngine(recent[0].e)
		recent = recent[1:]
	}
}

// takeRecent removes and returns the recent rule set of key, or nil.
func takeRecent(key string) *engine {
	recentMu.Lock()
	defer recentMu.Unlock()
	for i, r := range recent {
		if r.key == key {
			recent = append(recent[:i], recent[i+1:]...)
			return r.e
		}
	}
	return nil
}

func hasRecent(key string) bool {
	recentMu.Lock()
	defer recentMu.Unlock()
	for _, r := range recent {
		if r.key == key {
			return true
		}
	}
	return false
}

func closeEngine(e *engine) {
	if c, ok := e.waf.(io.Closer); ok {
		_ = c.Close()
	}
}

// configKey is the hash of everything the compiled rule set depends on.
func configKey(h *WAF) string {
	b, _ := json.Marshal(h)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// acquire returns the compiled rule set of h's config, compiling it when
// no running or recent config has it; release gives it back.
func acquire(h *WAF) (*engine, string, error) {
	key := configKey(h)
	v, _, err := engines.LoadOrNew(key, func() (caddy.Destructor, error) {
		if e := takeRecent(key); e != nil {
			return e, nil
		}
		return build(h, key)
	})
	if err != nil {
		return nil, "", err
	}
	return v.(*engine), key, nil
}

func release(key string) { _, _ = engines.Delete(key) }

// validateCompile compiles h's rule set unless a running or recent config
// has it, and keeps it among the recent ones for the load that follows.
func validateCompile(h *WAF) error {
	key := configKey(h)
	if _, ok := engines.References(key); ok || hasRecent(key) {
		return nil
	}
	e, err := build(h, key)
	if err != nil {
		return err
	}
	keepRecent(e)
	return nil
}

func build(h *WAF, key string) (*engine, error) {
	compileMu.Lock()
	defer compileMu.Unlock()
	cfg := coraza.NewWAFConfig().
		WithRootFS(coreruleset.FS).
		WithDirectives(prelude(h)).
		WithDirectives("Include @crs-setup.conf.example").
		WithDirectives("Include @owasp_crs/*.conf")
	if len(h.ExcludeRuleIDs) > 0 {
		var b strings.Builder
		b.WriteString("SecRuleRemoveById")
		for _, id := range h.ExcludeRuleIDs {
			b.WriteString(" " + strconv.Itoa(id))
		}
		cfg = cfg.WithDirectives(b.String())
	}
	if strings.TrimSpace(h.Directives) != "" {
		cfg = cfg.WithDirectives(h.Directives)
	}
	compilations.Add(1)
	w, err := coraza.NewWAF(cfg)
	if err != nil {
		return nil, err
	}
	return &engine{waf: w, key: key}, nil
}

// prelude is what comes before the CRS: the engine settings this config
// owns (directives may not change them) and the CRS settings.
func prelude(h *WAF) string {
	engine := "On"
	if h.Mode == "detect" {
		engine = "DetectionOnly"
	}
	resp := "Off"
	if h.InspectResponse {
		resp = "On"
	}
	limit := strconv.FormatInt(h.RequestBodyLimit, 10)
	return fmt.Sprintf(`SecRuleEngine %s
SecRequestBodyAccess On
SecRequestBodyLimit %s
SecRequestBodyInMemoryLimit %s
SecRequestBodyLimitAction ProcessPartial
SecRequestBodyJsonDepthLimit 1024
SecResponseBodyAccess %s
SecResponseBodyMimeType text/plain text/html text/xml application/json
SecResponseBodyLimit %s
SecResponseBodyLimitAction ProcessPartial
SecAuditEngine Off
SecDefaultAction "phase:3,log,auditlog,pass"
SecDefaultAction "phase:4,log,auditlog,pass"
SecRule REQUEST_HEADERS:Content-Type "^(?:application(?:/soap\+|/)|text/)xml" "id:200000,phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=XML"
SecRule REQUEST_HEADERS:Content-Type "^application/json" "id:200001,phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=JSON"
SecRule REQUEST_HEADERS:Content-Type "^application/[a-z0-9.-]+[+]json" "id:200006,phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=JSON"
SecRule REQBODY_ERROR "!@eq 0" "id:200002,phase:2,t:none,log,deny,status:400,msg:'Failed to parse request body.',severity:2,chain"
SecRule INBOUND_DATA_ERROR "@eq 0" ""
SecRule MULTIPART_STRICT_ERROR "!@eq 0" "id:200003,phase:2,t:none,log,deny,status:400,msg:'Multipart request body failed strict validation.'"
SecAction "id:900000,phase:1,pass,t:none,nolog,setvar:tx.blocking_paranoia_level=%d"
SecAction "id:900200,phase:1,pass,t:none,nolog,setvar:'tx.allowed_methods=%s'"
SecAction "id:900110,phase:1,pass,t:none,nolog,setvar:tx.inbound_anomaly_score_threshold=%d,setvar:tx.outbound_anomaly_score_threshold=%d"
`, engine, limit, limit, resp, limit, h.ParanoiaLevel, strings.Join(h.AllowedMethods, " "), h.InboundAnomalyThreshold, h.OutboundAnomalyThreshold)
}
