package health

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// The gRPC health-checking protocol (grpc.health.v1): a unary call of
// Health/Check with a HealthCheckRequest{service}, answered with a
// HealthCheckResponse{status}, SERVING being 1. The two messages have one
// field each, so they are written and read here rather than through
// generated code.
const (
	grpcHealthPath    = "/grpc.health.v1.Health/Check"
	grpcServing       = 1
	grpcHealthMaxBody = 1 << 10 // a HealthCheckResponse is a few bytes
)

// grpcHealthService is the service name a health_path names: "/" (or
// empty) the server as a whole, "/pkg.Service" that service.
func grpcHealthService(path string) string {
	name := strings.TrimPrefix(path, "/")
	if n, err := url.PathUnescape(name); err == nil {
		name = n
	}
	return name
}

// grpcHealthRequest is the framed HealthCheckRequest for service: the
// gRPC message prefix (uncompressed, length) and field 1 (string).
func grpcHealthRequest(service string) []byte {
	var msg []byte
	if service != "" {
		msg = append(msg, 0x0a) // field 1, length-delimited
		msg = binary.AppendUvarint(msg, uint64(len(service)))
		msg = append(msg, service...)
	}
	out := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(out[1:], uint32(len(msg)))
	return append(out, msg...)
}

// grpcHealthStatus reads the status (field 1, varint) of a framed
// HealthCheckResponse; an absent field is 0 (UNKNOWN).
func grpcHealthStatus(body []byte) (uint64, error) {
	if len(body) < 5 {
		return 0, errors.New("no HealthCheckResponse message")
	}
	if body[0] != 0 {
		return 0, errors.New("a compressed HealthCheckResponse")
	}
	n := binary.BigEndian.Uint32(body[1:5])
	msg := body[5:]
	if uint64(n) != uint64(len(msg)) {
		return 0, errors.New("a truncated HealthCheckResponse")
	}
	var status uint64
	for len(msg) > 0 {
		key, k := binary.Uvarint(msg)
		if k <= 0 {
			return 0, errors.New("a malformed HealthCheckResponse")
		}
		msg = msg[k:]
		switch key & 7 {
		case 0: // varint
			v, k := binary.Uvarint(msg)
			if k <= 0 {
				return 0, errors.New("a malformed HealthCheckResponse")
			}
			msg = msg[k:]
			if key>>3 == 1 {
				status = v
			}
		case 2: // length-delimited (a field added later)
			l, k := binary.Uvarint(msg)
			if k <= 0 || l > uint64(len(msg)-k) {
				return 0, errors.New("a malformed HealthCheckResponse")
			}
			msg = msg[k+int(l):]
		default:
			return 0, errors.New("a malformed HealthCheckResponse")
		}
	}
	return status, nil
}

// grpcStatusNames are the gRPC status codes a health check reports by
// name.
var grpcStatusNames = map[string]string{
	"1": "CANCELLED", "2": "UNKNOWN", "4": "DEADLINE_EXCEEDED", "5": "NOT_FOUND",
	"7": "PERMISSION_DENIED", "12": "UNIMPLEMENTED", "13": "INTERNAL", "14": "UNAVAILABLE", "16": "UNAUTHENTICATED",
}

// checkGRPC calls grpc.health.v1.Health/Check for the service the path
// names: healthy when the call succeeds with SERVING.
func (c *probe) checkGRPC(ctx context.Context, addr string) error {
	service := grpcHealthService(c.key.check.Path)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url(grpcHealthPath), bytes.NewReader(grpcHealthRequest(service)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	resp, err := c.do(req, addr)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, grpcHealthMaxBody))
	if err != nil {
		return fmt.Errorf("gRPC health check: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, grpcHealthMaxBody)) // the trailers follow the body
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("gRPC health check answered HTTP %d", resp.StatusCode)
	}
	code := resp.Trailer.Get("Grpc-Status")
	if code == "" {
		code = resp.Header.Get("Grpc-Status") // trailers-only
	}
	if code != "0" {
		name := grpcStatusNames[code]
		if name == "" {
			name = "status " + code
		}
		return fmt.Errorf("gRPC health check of %q answered %s", service, name)
	}
	status, err := grpcHealthStatus(body)
	if err != nil {
		return fmt.Errorf("gRPC health check: %w", err)
	}
	if status != grpcServing {
		return fmt.Errorf("gRPC health check of %q: not SERVING (status %d)", service, status)
	}
	return nil
}
