// Package records defines the request record: one completed proxied request,
// the shape shared by GET /api/v1/requests, the event stream and http-log.
// It holds no logic; its tests are the sinks' (modules/plugins/httplog,
// adminext/tests' request and event stream tests).
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
}

// Sink receives completed records. Implementations must not block: the
// record is handed over on the request path.
type Sink interface {
	Enqueue(*Record)
}
