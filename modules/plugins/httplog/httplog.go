// Package httplog holds the gateway's http-log plugin type: completed
// request records are queued and posted as JSON arrays to an HTTP collector
// in the background. Senders are process-wide (state.go), keyed by
// plugin instance, so a reload keeps the queue.
package httplog

import (
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gateway/gateway/internal/gwctx"
	"github.com/caddy-gateway/gateway/internal/records"
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/modules/plugins/httplog/logsender"
	"github.com/caddy-gateway/gateway/schema"
)

func init() {
	plugins.Register(plugins.Type{Name: "http-log", Ordering: 1500, Outer: true, Doc: "Sends one JSON record per request, in batches, to a collector URL; records beyond the queue (queue_max_size records, and at most 64 MiB held per plugin) are dropped and counted. A removed plugin sends what it has queued once, 10 s after the change, and gives the rest up (counted as failed) at the first batch the collector does not accept.", New: func() plugins.Plugin { return new(HTTPLog) }})
}

// HTTPLog is the http-log plugin.
type HTTPLog struct {
	Endpoint        string            `json:"endpoint" schema:"required,url,secret" doc:"Collector URL (http or https) the batches are sent to. Its credentials (user:password@) and the values of its query (where collectors take API keys: ?api_key=...) are secrets: viewers and exports without secrets see <redacted> in their place. Never the gateway admin API or Caddy's admin endpoint, nor a link-local or cloud metadata address unless settings allow_link_local_destinations is true (400; refused again when the name is resolved)."`
	Method          string            `json:"method" schema:"enum=POST|PUT|PATCH" doc:"HTTP method of the batch requests."`
	Headers         map[string]string `json:"headers" schema:"secret,keys=header_name,header_value,maxItems=100" doc:"Extra request headers of the batch requests (e.g. Authorization). The values are secrets: viewers and exports without secrets see <redacted>. Sent literally (no placeholders)."`
	BatchMaxSize    int               `json:"batch_max_size" schema:"min=1,max=10000" doc:"Most records per batch; a full batch is sent at once. A batch also holds at most 4 MiB of records (counted as for queue_max_size)."`
	FlushIntervalMS int64             `json:"flush_interval_ms" schema:"min=1,max=3600000" doc:"Queued records are sent at least this often."`
	TimeoutMS       int64             `json:"timeout_ms" schema:"min=1,max=600000" doc:"Timeout of one batch request."`
	QueueMaxSize    int               `json:"queue_max_size" schema:"min=1,max=1000000" doc:"Records waiting beyond this are dropped (and counted). Whatever the count, a plugin holds at most 64 MiB of records, queued or being sent, each counted as its text (path, host, user agent …) plus 344 bytes (and a waf verdict its rules): records beyond that are dropped and counted alike. Everyday records (a few hundred bytes) fit about 200,000 in it; the largest the client can make (~3.3 KB) about 20,000."`

	plugins.Instance

	sender *logsender.Sender
}

// CaddyModule returns the Caddy module information.
func (*HTTPLog) CaddyModule() caddy.ModuleInfo { return plugins.ModuleInfo[HTTPLog]("http-log") }

// Provision implements caddy.Provisioner: it acquires the instance's
// process-wide sender.
func (h *HTTPLog) Provision(caddy.Context) error {
	if err := schema.Check(h); err != nil {
		return err
	}
	h.sender = senders.Acquire(plugins.InstanceKey(h.InstanceID, h), logsender.Config{
		Endpoint:      h.Endpoint,
		Method:        h.Method,
		Headers:       h.Headers,
		BatchMaxSize:  h.BatchMaxSize,
		FlushInterval: time.Duration(h.FlushIntervalMS) * time.Millisecond,
		Timeout:       time.Duration(h.TimeoutMS) * time.Millisecond,
		QueueMaxSize:  h.QueueMaxSize,
	})
	return nil
}

// Validate implements caddy.Validator and schema.Validator.
func (h *HTTPLog) Validate() error {
	if err := plugins.CheckCollectorURL("endpoint", h.Endpoint); err != nil {
		return err
	}
	if _, ok := h.Headers[""]; ok {
		return schema.Errorf("headers", "keys must not be empty")
	}
	return nil
}

// ServeHTTP implements caddyhttp.MiddlewareHandler. In the gateway the proxy
// server builds the record once the response is done and hands it to the
// sinks of the request, this plugin's sender among them. Used on its own,
// the outermost http-log plugin builds the record itself.
func (h *HTTPLog) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	info, r := gwctx.Ensure(r)
	if h.sender != nil && !slices.Contains(info.Sinks, records.Sink(h.sender)) {
		info.Sinks = append(info.Sinks, h.sender)
	}
	if info.RecordBuilt {
		return next.ServeHTTP(w, r)
	}
	info.RecordBuilt = true // this plugin builds it (for inner http-log plugins too)

	rw := gwctx.NewRecordingWriter(w)
	err := next.ServeHTTP(rw, r)
	status := rw.Status
	if status == 0 {
		status = http.StatusOK
		if err != nil {
			status = http.StatusInternalServerError
			var he caddyhttp.HandlerError
			if errors.As(err, &he) && he.StatusCode != 0 {
				status = he.StatusCode
			}
		}
	}
	record := gwctx.NewRecord(r, info, status, rw.Bytes, time.Now())
	record.ID = gwctx.NextRecordID()
	for _, s := range info.Sinks {
		s.Enqueue(record)
	}
	return err
}

// Cleanup implements caddy.CleanerUpper: the sender keeps running while a
// newer config holds it, and stops after a grace period otherwise.
func (h *HTTPLog) Cleanup() error {
	senders.Release(h.sender)
	return nil
}

// RecordSink returns this instance's sender (nil before Provision). A router
// that runs plugins in ordering can register it on a request's Info before
// the chain runs, so that requests answered by an earlier plugin (401, 403,
// 429, cache hits) are logged too: ServeHTTP only registers it when the
// request reaches this plugin. Registering twice is harmless: ServeHTTP
// does not add a sink that is already there.
func (h *HTTPLog) RecordSink() records.Sink {
	if h.sender == nil {
		return nil
	}
	return h.sender
}

// Dropped is the number of records this instance's sender dropped because
// its queue was full (the sender is shared by reloads of the instance).
func (h *HTTPLog) Dropped() uint64 {
	if h.sender == nil {
		return 0
	}
	return h.sender.Dropped()
}

// Stats describes this instance's sender.
func (h *HTTPLog) Stats() logsender.Stats {
	if h.sender == nil {
		return logsender.Stats{}
	}
	return h.sender.Stats()
}

// SetDefaults implements schema.Defaulter.
func (h *HTTPLog) SetDefaults() {
	h.Endpoint = ""
	h.Method = "POST"
	h.Headers = map[string]string{}
	h.BatchMaxSize = 100
	h.FlushIntervalMS = 1000
	h.TimeoutMS = 5000
	h.QueueMaxSize = 10000
}

// UnmarshalCaddyfile implements caddyfile.Unmarshaler with the plugins'
// shared syntax (plugins.UnmarshalCaddyfile):
//
//	gateway_http_log [<endpoint>] {
//	    endpoint <url>
//	    method POST|PUT|PATCH
//	    headers <name> <value>
//	    batch_max_size <n>
//	    flush_interval_ms <ms>
//	    timeout_ms <ms>
//	    queue_max_size <n>
//	}
//
// header is accepted for headers.
func (h *HTTPLog) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return plugins.UnmarshalCaddyfile(d, h, plugins.Syntax{Args: []string{"endpoint"}, Aliases: map[string]string{"header": "headers"}})
}

// Interface guards
var (
	_ plugins.Plugin     = (*HTTPLog)(nil)
	_ caddy.CleanerUpper = (*HTTPLog)(nil)
)
