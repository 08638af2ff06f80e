// Package ratelimit holds the gateway's rate-limit plugin type: a sliding
// window limit per client IP, consumer, route, service, header value or
// globally. Counters live in the package's process-wide store (state.go),
// held by the instances that use them, so they survive config reloads.
package ratelimit

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-gateway/gateway/internal/clientid"
	"github.com/caddy-gateway/gateway/internal/gwctx"
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/modules/plugins/ratelimit/shared"
	"github.com/caddy-gateway/gateway/modules/plugins/ratelimit/slidingwindow"
	"github.com/caddy-gateway/gateway/schema"
)

func init() {
	plugins.Register(plugins.Type{Name: "rate-limit", Ordering: 700, Doc: "Sliding-window request limit per key (client ip, consumer, route, service, header value or one global counter); over the limit the answer is 429. Counters live for the process and survive config reloads; it holds at most 262,144 of them, and past that a new key takes the place of the counter that holds the least of its limit in a random sample, so spraying fresh keys does not reset another client's exhausted counter.", New: func() plugins.Plugin { return new(RateLimit) }})
}

// RateLimit is the rate-limit plugin.
type RateLimit struct {
	Limit            int64  `json:"limit" schema:"required,min=1,max=1000000000" doc:"Requests allowed per window and key."`
	WindowS          int64  `json:"window_s" schema:"min=1,max=31536000" doc:"Window length in seconds (sliding window)."`
	Key              string `json:"key" schema:"enum=ip|consumer|route|service|global|header" doc:"What is counted separately: client ip, authenticated consumer (falls back to ip), route, service, one global counter, or the value of header_name (falls back to ip when absent)."`
	HeaderName       string `json:"header_name" schema:"header_name" doc:"Request header whose value is the key (key header)."`
	IPv6PrefixLength int    `json:"ipv6_prefix_length" schema:"min=1,max=128" doc:"Extension. Prefix length an IPv6 client is counted by wherever the key is the client ip (also the fallback of consumer and header): every address of one /64 is one client by default, as one subscriber's network is; 128 counts each address. An IPv4-mapped IPv6 address (::ffff:203.0.113.8) always counts as its IPv4 address. The admin API's failed-login limit counts clients the same way (per /64)."`
	// Extension: where the counters live, as Kong's rate-limiting policy.
	Policy         string `json:"policy" schema:"enum=local|redis|cluster" doc:"Where the counters live (extension). local: on each node (a limit of N lets N through per node); redis: in the gateway's Redis (Caddyfile gateway { redis <url> }, GATEWAY_REDIS_URL in the shipped Caddyfile; 400 when none is configured); cluster: in the PostgreSQL store the nodes share (400 on SQLite). The shared policies count every request on the store's clock with one atomic step, so a limit of N lets N through across all nodes; they survive config reloads like local counters."`
	SyncIntervalMS int64  `json:"sync_interval_ms" schema:"min=0,max=60000" doc:"redis and cluster (extension): 0 counts every request in the shared store (exact). Above 0 each node decides from the shared counts of its last exchange plus its own requests since, and exchanges every interval: a window then admits at most the limit plus what the other nodes admitted within one interval, and never more than the number of nodes times the limit. Must be 0 for local."`
	FaultTolerant  bool   `json:"fault_tolerant" doc:"redis and cluster (extension): when the shared store does not answer within 100 ms (Redis) or 250 ms (PostgreSQL) or is known to be down (probed every 500 ms), count on this node alone (logged once a minute, counted by gateway_rate_limit_fallbacks_total) until it answers again; false answers 503 instead. Default true."`

	plugins.Instance
	plugins.Held

	store        *slidingwindow.Store
	prefix       string
	sharedPrefix string // the instance's key in a shared store (no NUL: PostgreSQL text)
	window       time.Duration
	syncInterval time.Duration
	limit        string // Limit, formatted once for the RateLimit-Limit header
	logger       *zap.Logger
	syncer       atomic.Pointer[shared.Syncer]
}

// The response headers' canonical forms (http.Header keys): set without
// canonicalizing (and allocating) the names on every request.
var (
	headerLimit      = http.CanonicalHeaderKey("RateLimit-Limit")
	headerRemaining  = http.CanonicalHeaderKey("RateLimit-Remaining")
	headerReset      = http.CanonicalHeaderKey("RateLimit-Reset")
	headerRetryAfter = http.CanonicalHeaderKey("Retry-After")
)

// CaddyModule returns the Caddy module information.
func (*RateLimit) CaddyModule() caddy.ModuleInfo { return plugins.ModuleInfo[RateLimit]("rate-limit") }

// Provision implements caddy.Provisioner.
func (rl *RateLimit) Provision(ctx caddy.Context) error {
	if err := schema.Check(rl); err != nil {
		return err
	}
	rl.logger = ctx.Logger()
	rl.syncInterval = time.Duration(rl.SyncIntervalMS) * time.Millisecond
	rl.store = counters
	rl.window = time.Duration(rl.WindowS) * time.Second
	rl.limit = strconv.FormatInt(rl.Limit, 10)
	// counters are kept per instance (see InstanceID)
	rl.prefix = plugins.InstanceKey(rl.InstanceID, rl) + "\x00"
	rl.sharedPrefix = plugins.InstanceKey(rl.InstanceID, rl) + "/"
	rl.Held = instances.Hold(rl.prefix) // Cleanup releases the counters
	return nil
}

// Validate implements caddy.Validator and schema.Validator.
func (rl *RateLimit) Validate() error {
	if rl.Key == "header" && rl.HeaderName == "" {
		return schema.Errorf("header_name", "is required when key is header")
	}
	if rl.Policy == "local" && rl.SyncIntervalMS != 0 {
		return schema.Errorf("sync_interval_ms", "applies to the redis and cluster policies only; must be 0 with policy local")
	}
	return nil
}

// ServeHTTP implements caddyhttp.MiddlewareHandler.
func (rl *RateLimit) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	store := rl.store
	if store == nil {
		store = counters
	}
	var buf [128]byte
	var res slidingwindow.Result
	switch rl.Policy {
	case "redis", "cluster":
		var ok bool
		if res, ok = rl.takeShared(r, store); !ok {
			gwctx.WriteError(w, http.StatusServiceUnavailable, "rate limit store unreachable")
			return nil
		}
	default:
		res = store.TakeBytes(rl.key(buf[:0], r), rl.Limit, rl.window)
	}
	// The header values: the numbers formatted into one string, and one
	// backing array of values, each capacity-limited so an append to one
	// never writes into another (the gateway's writer has room for it).
	nums := strconv.AppendInt(buf[:0], res.Remaining, 10)
	split := len(nums)
	nums = strconv.AppendInt(nums, seconds(res.Reset), 10)
	text := string(nums)
	rw, _ := w.(*gwctx.RecordingWriter)
	vals := rw.Values(3)
	vals[0] = rl.limit
	if vals[0] == "" { // not provisioned
		vals[0] = strconv.FormatInt(res.Limit, 10)
	}
	vals[1], vals[2] = text[:split], text[split:]
	h := w.Header()
	h[headerLimit] = vals[0:1:1]
	h[headerRemaining] = vals[1:2:2]
	h[headerReset] = vals[2:3:3]
	if !res.Allowed {
		h[headerRetryAfter] = []string{strconv.FormatInt(seconds(res.RetryAfter), 10)}
		gwctx.WriteError(w, http.StatusTooManyRequests, "rate limit exceeded")
		return nil
	}
	return next.ServeHTTP(w, r)
}

// takeShared counts the request in the policy's shared store (directly,
// or through the node's syncer when sync_interval_ms is above 0). When the
// store is unreachable the request is counted in local (fault_tolerant) or
// ok is false (503).
func (rl *RateLimit) takeShared(r *http.Request, local *slidingwindow.Store) (res slidingwindow.Result, ok bool) {
	store := rl.sharedStore()
	window := rl.window
	if window <= 0 { // not provisioned
		window = time.Minute
	}
	kind, value := rl.keyOf(r)
	if kind == kindIP {
		value = string(clientid.AppendKey(nil, value, rl.IPv6PrefixLength))
	}
	if kind == "header:" && !utf8.ValidString(value) {
		sum := sha256.Sum256([]byte(value))
		value = "sha256:" + hex.EncodeToString(sum[:])
	}
	key := rl.sharedPrefix + kind + value
	var c shared.Counts
	err := shared.ErrUnavailable
	if store != nil {
		var syncer *shared.Syncer
		if rl.syncInterval > 0 {
			syncer = rl.syncerFor(store)
		}
		held, synced := false, true
		if syncer != nil {
			c, held, synced = syncer.Take(key, rl.Limit, window, time.Now())
		}
		switch {
		case held && synced:
			err = nil
		case held:
			// Decided from this node's counts alone: the store is down.
		default:
			c, err = store.Take(r.Context(), key, rl.Limit, window, 1, true)
			if err == nil && syncer != nil {
				syncer.Seed(key, rl.Limit, window, c)
			}
		}
		if held && !synced && rl.FaultTolerant {
			shared.NoteFallback(rl.logger, rl.Policy, true, shared.ErrUnavailable)
			return rl.outcome(c, window), true
		}
	}
	if err == nil {
		return rl.outcome(c, window), true
	}
	if !rl.FaultTolerant {
		shared.NoteFallback(rl.logger, rl.Policy, false, err)
		return res, false
	}
	shared.NoteFallback(rl.logger, rl.Policy, true, err)
	var buf [128]byte
	return local.TakeBytes(rl.key(buf[:0], r), rl.Limit, window), true
}

func (rl *RateLimit) outcome(c shared.Counts, window time.Duration) slidingwindow.Result {
	return slidingwindow.Outcome(c.Allowed, float64(c.Prev), float64(c.Curr), slidingwindow.Frac(c.Now, window), rl.Limit, window)
}

// sharedStore is the policy's store of the process (nil: none).
func (rl *RateLimit) sharedStore() shared.Store {
	switch rl.Policy {
	case "redis":
		if s := shared.Redis(); s != nil {
			return s
		}
	case "cluster":
		if s := shared.Postgres(); s != nil {
			return s
		}
	}
	return nil
}

// syncerFor is the process's syncer of store at the instance's interval,
// remembered by the instance (the store changes only when the gateway's
// connection settings do).
func (rl *RateLimit) syncerFor(store shared.Store) *shared.Syncer {
	if s := rl.syncer.Load(); s != nil && s.Store() == store {
		return s
	}
	s := shared.SyncerFor(store, rl.syncInterval)
	rl.syncer.Store(s)
	return s
}

// key appends the request's counter key in the store to dst: the
// instance's prefix and the counted key (keyOf), a client address as its
// counting identity (package clientid: one client whatever the spelling
// of its address, an IPv6 network counted as one).
func (rl *RateLimit) key(dst []byte, r *http.Request) []byte {
	kind, value := rl.keyOf(r)
	dst = append(append(dst, rl.prefix...), kind...)
	if kind == kindIP {
		return clientid.AppendKey(dst, value, rl.IPv6PrefixLength)
	}
	return append(dst, value...)
}

// kindIP is keyOf's kind of a client address.
const kindIP = "ip:"

// keyOf is the counted key of a request, as a kind ("ip:", "consumer:" …)
// and a value.
func (rl *RateLimit) keyOf(r *http.Request) (kind, value string) {
	info := gwctx.From(r)
	switch rl.Key {
	case "global":
		return "global", ""
	case "consumer":
		if info != nil && info.Consumer != nil {
			return "consumer:", strconv.FormatInt(info.Consumer.ID, 10)
		}
	case "route":
		if info != nil {
			return "route:", strconv.FormatInt(info.RouteID, 10)
		}
		return "route:0", ""
	case "service":
		if info != nil {
			return "service:", strconv.FormatInt(info.ServiceID, 10)
		}
		return "service:0", ""
	case "header":
		if v := r.Header.Get(rl.HeaderName); v != "" {
			if len(v) > 128 { // bound the memory a key takes
				sum := sha256.Sum256([]byte(v))
				v = "sha256:" + hex.EncodeToString(sum[:])
			}
			return "header:", v
		}
	}
	return kindIP, gwctx.ClientIP(r)
}

// seconds rounds up to whole seconds, at least 1.
func seconds(d time.Duration) int64 {
	s := int64(math.Ceil(d.Seconds()))
	if s < 1 {
		s = 1
	}
	return s
}

// SetDefaults implements schema.Defaulter.
func (rl *RateLimit) SetDefaults() {
	rl.Limit = 0
	rl.WindowS = 60
	rl.Key = "ip"
	rl.HeaderName = ""
	rl.IPv6PrefixLength = clientid.DefaultIPv6Prefix
	rl.Policy = "local"
	rl.SyncIntervalMS = 0
	rl.FaultTolerant = true
}

// UnmarshalCaddyfile implements caddyfile.Unmarshaler with the plugins'
// shared syntax (plugins.UnmarshalCaddyfile):
//
//	gateway_rate_limit [<limit> [<window_s>]] {
//	    limit <n>
//	    window_s <seconds>
//	    key ip|consumer|route|service|global|header [<header_name>]
//	    header_name <name>
//	    ipv6_prefix_length <bits>
//	    policy local|redis|cluster
//	    sync_interval_ms <ms>
//	    fault_tolerant true|false
//	}
func (rl *RateLimit) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return plugins.UnmarshalCaddyfile(d, rl, plugins.Syntax{
		Args: []string{"limit", "window_s"},
		// key takes the header name too: key header X-User
		Blocks: map[string]func(*caddyfile.Dispenser) error{"key": func(d *caddyfile.Dispenser) error {
			args := d.RemainingArgs()
			if len(args) < 1 || len(args) > 2 {
				return d.ArgErr()
			}
			rl.Key = args[0]
			if len(args) == 2 {
				rl.HeaderName = args[1]
			}
			return nil
		}},
	})
}

// Interface guards
var (
	_ plugins.Plugin     = (*RateLimit)(nil)
	_ caddy.CleanerUpper = (*RateLimit)(nil)
)
