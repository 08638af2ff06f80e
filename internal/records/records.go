// Package records defines the request record: one completed proxied request,
// the shape shared by GET /api/v1/requests, the event stream and http-log.
// It holds no logic; its tests are the sinks' (modules/plugins/httplog,
// app/tests' request and event stream tests).
package records

import "time"

// Record is one completed request (GET /api/v1/requests, the event stream
// and http-log batches; the OpenAPI document gives its shape).
type Record struct {
	ID         int64     `json:"id"`
	Time       time.Time `json:"time"`
	Method     string    `json:"method"`
	Scheme     string    `json:"scheme"`
	Host       string    `json:"host"`
	Path       string    `json:"path"`
	Status     int       `json:"status"`
	LatencyMS  float64   `json:"latency_ms"`
	BytesSent  int64     `json:"bytes_sent"`
	RouteID    *int64    `json:"route_id"`
	ServiceID  *int64    `json:"service_id"`
	Target     *string   `json:"target"`
	ConsumerID *int64    `json:"consumer_id"`
	ClientIP   *string   `json:"client_ip"`
	UserAgent  *string   `json:"user_agent"`
	RequestID  *string   `json:"request_id"`
	// GRPCStatus is an extension: the grpc-status a gRPC call ended with
	// (the gateway's own answer's, or the target's), absent for other
	// requests; Status stays the HTTP status the gateway meant.
	GRPCStatus *int `json:"grpc_status,omitempty"`
	// Extension: set when an opentelemetry plugin traced the request.
	TraceID *string `json:"trace_id" doc:"Extension: the trace id (32 hex digits) of the request when an opentelemetry plugin traced it, else null."`
	SpanID  *string `json:"span_id" doc:"Extension: the id (16 hex digits) of the request's server span when an opentelemetry plugin traced it, else null."`
	// WAF is what the waf plugin found (an extension of the contract's
	// record): present only when a rule matched.
	WAF *WAF `json:"waf,omitempty" doc:"Extension: what the waf plugin found, present only when one of its rules matched (docs/waf.md)."`
}

// WAF is the waf plugin's verdict on a request.
type WAF struct {
	// Action is "blocked" (the gateway answered 403 or 413) or "detected"
	// (rules matched, the request went on: detect mode, or a score below
	// the threshold).
	Action string `json:"action" schema:"enum=blocked|detected" doc:"blocked: the gateway answered 403 (or 413, a body over the limit); detected: rules matched and the request went on (detect mode, or a score under the threshold)."`
	// AnomalyScore is the inbound anomaly score the rule set computed,
	// OutboundAnomalyScore the response's (inspect_response).
	AnomalyScore         int `json:"anomaly_score" doc:"The CRS inbound anomaly score."`
	OutboundAnomalyScore int `json:"outbound_anomaly_score" doc:"The CRS outbound anomaly score (inspect_response)."`
	// Rules are the logged rules that matched, in order (at most 64).
	Rules []WAFRule `json:"rules" doc:"The logged rules that matched, in order, at most 64."`
}

// WAFRule is one matched rule: its id and message (never the matched
// data, which may be a client's secret).
type WAFRule struct {
	ID      int    `json:"id" doc:"The rule id."`
	Message string `json:"message" doc:"The rule's message (at most 256 bytes); never the matched data."`
}

// Sink receives completed records. Implementations must not block: the
// record is handed over on the request path.
type Sink interface {
	Enqueue(*Record)
}
