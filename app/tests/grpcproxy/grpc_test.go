// Package grpcproxy tests gRPC through the gateway with real gRPC servers
// and clients (google.golang.org/grpc) on 127.0.0.1: grpc (h2c) and grpcs
// (TLS) services, the h2c proxy listener, every call shape, metadata,
// trailers, deadlines, gRPC health checks and the gateway's own answers as
// gRPC statuses; and HTTP/3 on the HTTPS proxy listener with a quic-go
// client. It is its own package (its own test process) because it
// puts a test CA into the system roots (SSL_CERT_FILE) before anything
// loads them.
package grpcproxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

// serverCert is a certificate for example.com and 127.0.0.1, trusted
// through SSL_CERT_FILE (httptest's self-signed one).
var serverCert tls.Certificate

func TestMain(m *testing.M) {
	ts := httptest.NewUnstartedServer(nil)
	ts.StartTLS()
	serverCert = ts.TLS.Certificates[0]
	dir, _ := os.MkdirTemp("", "grpcproxy")
	ca := filepath.Join(dir, "ca.pem")
	_ = os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), 0o600)
	ts.Close()
	os.Setenv("SSL_CERT_FILE", ca)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// testService is grpc.testing.TestService: echoes, streams, metadata.
type testService struct {
	testpb.UnimplementedTestServiceServer
	name string
}

// UnaryCall echoes the payload. Metadata: x-in is echoed in the header
// (x-out) and in a trailer (x-trailer); x-sleep (a duration) makes the
// call wait that long whatever its deadline, as a slow server does. The
// request's response_status is returned as the call's status.
func (s *testService) UnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("x-sleep"); len(v) > 0 {
		d, _ := time.ParseDuration(v[0])
		time.Sleep(d)
	}
	if v := md.Get("x-in"); len(v) > 0 {
		_ = grpc.SetHeader(ctx, metadata.Pairs("x-out", v[0], "x-server", s.name))
		_ = grpc.SetTrailer(ctx, metadata.Pairs("x-trailer", v[0]+"-done"))
	}
	if st := req.GetResponseStatus(); st != nil && st.GetCode() != 0 {
		return nil, status.Error(codes.Code(st.GetCode()), st.GetMessage())
	}
	return &testpb.SimpleResponse{Payload: req.GetPayload(), Username: s.name}, nil
}

// StreamingOutputCall sends one message per response parameter.
func (s *testService) StreamingOutputCall(req *testpb.StreamingOutputCallRequest, stream grpc.ServerStreamingServer[testpb.StreamingOutputCallResponse]) error {
	for _, p := range req.GetResponseParameters() {
		if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: &testpb.Payload{Body: bytes.Repeat([]byte{'s'}, int(p.GetSize()))}}); err != nil {
			return err
		}
	}
	return nil
}

// StreamingInputCall answers the summed payload sizes.
func (s *testService) StreamingInputCall(stream grpc.ClientStreamingServer[testpb.StreamingInputCallRequest, testpb.StreamingInputCallResponse]) error {
	total := 0
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&testpb.StreamingInputCallResponse{AggregatedPayloadSize: int32(total)})
		}
		if err != nil {
			return err
		}
		total += len(req.GetPayload().GetBody())
	}
}

// FullDuplexCall answers every message with its payload at once.
func (s *testService) FullDuplexCall(stream grpc.BidiStreamingServer[testpb.StreamingOutputCallRequest, testpb.StreamingOutputCallResponse]) error {
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: req.GetPayload()}); err != nil {
			return err
		}
	}
}

// upstream is a running gRPC server with the test and health services.
type upstream struct {
	addr   string
	health *health.Server
	srv    *grpc.Server
}

func startUpstream(t *testing.T, name string, withTLS bool) *upstream {
	t.Helper()
	var opts []grpc.ServerOption
	if withTLS {
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{serverCert}})))
	}
	srv := grpc.NewServer(opts...)
	testpb.RegisterTestServiceServer(srv, &testService{name: name})
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return &upstream{addr: ln.Addr().String(), health: hs, srv: srv}
}

// grpcService creates a service of protocol proto with the upstream as its
// target and a route for the test service's paths.
func grpcService(t *testing.T, g *testgw.Gateway, name, proto string, up *upstream, extra map[string]any) (svc, route int64) {
	t.Helper()
	body := map[string]any{"name": name, "protocol": proto}
	for k, v := range extra {
		body[k] = v
	}
	svc = testgw.ID(g.Must("POST", "/api/v1/services", body))
	host, port := testgw.HostPort(t, up.addr)
	g.Must("POST", fmt.Sprintf("/api/v1/services/%d/targets", svc), map[string]any{"host": host, "port": port})
	route = g.Route(name, svc, map[string]any{"paths": []string{"/grpc.testing.TestService/"}})
	return svc, route
}

// enableH2C turns on the h2c setting.
func enableH2C(t *testing.T, g *testgw.Gateway) {
	t.Helper()
	s := g.Must("GET", "/api/v1/settings", nil)
	s["h2c"] = true
	g.Must("PUT", "/api/v1/settings", s)
}

// dial is a cleartext gRPC client of the gateway's HTTP listener.
func dial(t *testing.T, g *testgw.Gateway) testpb.TestServiceClient {
	t.Helper()
	cc, err := grpc.NewClient(g.ProxyAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return testpb.NewTestServiceClient(cc)
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// exercise runs every call shape through client and checks metadata,
// trailers and a large message.
func exercise(t *testing.T, client testpb.TestServiceClient, wantServer string) {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(callCtx(t), "x-in", "hello")

	// unary, metadata both ways, trailers, a 3 MiB message each way
	big := bytes.Repeat([]byte("0123456789abcdef"), 3<<16)
	var hdr, trl metadata.MD
	res, err := client.UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: big}}, grpc.Header(&hdr), grpc.Trailer(&trl))
	if err != nil {
		t.Fatalf("unary call: %v", err)
	}
	if !bytes.Equal(res.GetPayload().GetBody(), big) || res.GetUsername() != wantServer {
		t.Fatalf("unary call answered %d bytes from %q", len(res.GetPayload().GetBody()), res.GetUsername())
	}
	if got := hdr.Get("x-out"); len(got) != 1 || got[0] != "hello" {
		t.Fatalf("response metadata: %v", hdr)
	}
	if got := trl.Get("x-trailer"); len(got) != 1 || got[0] != "hello-done" {
		t.Fatalf("trailers: %v", trl)
	}

	// a status with a message, from the server, in the trailers
	_, err = client.UnaryCall(ctx, &testpb.SimpleRequest{ResponseStatus: &testpb.EchoStatus{Code: int32(codes.NotFound), Message: "no such thing: ü"}})
	if st, _ := status.FromError(err); st.Code() != codes.NotFound || st.Message() != "no such thing: ü" {
		t.Fatalf("server status: %v", err)
	}

	// server streaming
	params := make([]*testpb.ResponseParameters, 5)
	for i := range params {
		params[i] = &testpb.ResponseParameters{Size: int32(10 * (i + 1))}
	}
	out, err := client.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{ResponseParameters: params})
	if err != nil {
		t.Fatal(err)
	}
	for i := range params {
		m, err := out.Recv()
		if err != nil || len(m.GetPayload().GetBody()) != 10*(i+1) {
			t.Fatalf("server stream message %d: %v", i, err)
		}
	}
	if _, err := out.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("server stream end: %v", err)
	}

	// client streaming
	in, err := client.StreamingInputCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if err := in.Send(&testpb.StreamingInputCallRequest{Payload: &testpb.Payload{Body: make([]byte, 1000)}}); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := in.CloseAndRecv()
	if err != nil || sum.GetAggregatedPayloadSize() != 10000 {
		t.Fatalf("client stream: %v %v", sum, err)
	}

	// bidirectional streaming, message by message
	duplex, err := client.FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		body := []byte("ping " + strconv.Itoa(i))
		if err := duplex.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: body}}); err != nil {
			t.Fatal(err)
		}
		m, err := duplex.Recv()
		if err != nil || !bytes.Equal(m.GetPayload().GetBody(), body) {
			t.Fatalf("bidi message %d: %v", i, err)
		}
	}
	if err := duplex.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := duplex.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("bidi end: %v", err)
	}
}

// TestGRPCServices: grpc (h2c) and grpcs (TLS, tls_sni) services reached
// by a cleartext gRPC client through the h2c listener, every call shape.
func TestGRPCServices(t *testing.T) {
	g := testgw.Start(t, nil)
	h2c := startUpstream(t, "h2c", false)
	grpcService(t, g, "plain", "grpc", h2c, nil)

	// h2c on the listener is off by default: a prior-knowledge client
	// cannot talk to it.
	client := dial(t, g)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := client.UnaryCall(ctx, &testpb.SimpleRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("h2c off: %v", err)
	}
	enableH2C(t, g)
	exercise(t, dial(t, g), "h2c")

	// grpcs: HTTP/2 over verified TLS with tls_sni.
	secure := startUpstream(t, "tls", true)
	list := g.List("/api/v1/services")
	id := testgw.ID(list[0])
	g.Must("PUT", fmt.Sprintf("/api/v1/services/%d", id), map[string]any{"name": "plain", "protocol": "grpcs", "tls_sni": "example.com"})
	targets := g.List(fmt.Sprintf("/api/v1/services/%d/targets", id))
	host, port := testgw.HostPort(t, secure.addr)
	g.Must("PUT", fmt.Sprintf("/api/v1/targets/%d", testgw.ID(targets[0])), map[string]any{"host": host, "port": port})
	exercise(t, dial(t, g), "tls")
}

// TestGRPCGatewayAnswers: what the gateway answers itself to a gRPC call
// is a gRPC status (trailers-only), and the request record keeps the HTTP
// status meant and the grpc-status.
func TestGRPCGatewayAnswers(t *testing.T) {
	g := testgw.Start(t, nil)
	enableH2C(t, g)
	up := startUpstream(t, "up", false)
	_, route := grpcService(t, g, "keyed", "grpc", up, nil)
	g.Must("POST", "/api/v1/plugins", map[string]any{"type": "key-auth", "scope": "route", "route_id": route})
	g.Consumer("bob", map[string]any{"type": "key-auth", "key": "bob-key"})
	client := dial(t, g)

	want := func(err error, code codes.Code, what string) {
		t.Helper()
		st, ok := status.FromError(err)
		if !ok || st.Code() != code {
			t.Fatalf("%s: %v, want %v", what, err, code)
		}
	}
	_, err := client.UnaryCall(callCtx(t), &testpb.SimpleRequest{})
	want(err, codes.Unauthenticated, "no key")
	keyed := metadata.AppendToOutgoingContext(callCtx(t), "apikey", "bob-key")
	if _, err := client.UnaryCall(keyed, &testpb.SimpleRequest{}); err != nil {
		t.Fatalf("key in metadata: %v", err)
	}
	// no route: UNIMPLEMENTED
	cc, err := grpc.NewClient(g.ProxyAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	_, err = healthpb.NewHealthClient(cc).Check(callCtx(t), &healthpb.HealthCheckRequest{})
	want(err, codes.Unimplemented, "no route")

	// no target available: UNAVAILABLE
	dead := g.DeadService("dead")
	g.Must("PUT", fmt.Sprintf("/api/v1/routes/%d", route), map[string]any{"name": "keyed", "service_id": dead, "paths": []string{"/grpc.testing.TestService/"}})
	_, err = client.UnaryCall(keyed, &testpb.SimpleRequest{})
	want(err, codes.Unavailable, "dead target")

	// the records: HTTP status meant, grpc_status seen
	var recs []map[string]any
	g.JSON("GET", "/api/v1/requests", nil, &recs)
	seen := map[string]bool{}
	for _, r := range recs {
		gs, _ := r["grpc_status"].(float64)
		seen[fmt.Sprintf("%v/%v", r["status"], gs)] = true
	}
	for _, k := range []string{"401/16", "200/0", "404/12", "502/14"} {
		if !seen[k] && !(k == "502/14" && seen["503/14"]) {
			t.Errorf("no record %s among %v", k, seen)
		}
	}
}

// TestGRPCDeadlinesNotTargetFailures: calls whose deadline passes while
// the server is still at work (it resets their streams) never take the
// healthy target out of rotation; the deadline a client asks for is
// capped by the service's read_timeout_ms.
func TestGRPCDeadlinesNotTargetFailures(t *testing.T) {
	g := testgw.Start(t, nil)
	enableH2C(t, g)
	up := startUpstream(t, "up", false)
	grpcService(t, g, "slow", "grpc", up, map[string]any{"retries": 0, "read_timeout_ms": 300})
	client := dial(t, g)

	for i := 0; i < 6; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		ctx = metadata.AppendToOutgoingContext(ctx, "x-sleep", "400ms")
		_, err := client.UnaryCall(ctx, &testpb.SimpleRequest{})
		cancel()
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("call %d past its deadline: %v", i, err)
		}
	}
	// a deadline longer than read_timeout_ms ends at the cap
	ctx := metadata.AppendToOutgoingContext(callCtx(t), "x-sleep", "2s")
	if _, err := client.UnaryCall(ctx, &testpb.SimpleRequest{}); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("capped deadline: %v", err)
	}
	// the target is still in rotation
	for i := 0; i < 3; i++ {
		if _, err := client.UnaryCall(callCtx(t), &testpb.SimpleRequest{}); err != nil {
			t.Fatalf("call after deadlines: %v", err)
		}
	}
}

// TestGRPCHealthCheck: health_path of a grpc service names the service
// checked with grpc.health.v1.Health/Check.
func TestGRPCHealthCheck(t *testing.T) {
	g := testgw.Start(t, &testgw.Options{HealthInterval: 50 * time.Millisecond})
	up := startUpstream(t, "up", false)
	up.health.SetServingStatus("grpc.testing.TestService", healthpb.HealthCheckResponse_NOT_SERVING)
	svc, _ := grpcService(t, g, "checked", "grpc", up, map[string]any{"health_path": "/"})
	waitState := func(want string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			var hs []map[string]any
			g.JSON("GET", "/api/v1/health", nil, &hs)
			if len(hs) == 1 && hs[0]["state"] == want && hs[0]["check"] == "grpc" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("health: %v, want %s", hs, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitState("healthy")
	g.Must("PUT", fmt.Sprintf("/api/v1/services/%d", svc), map[string]any{"name": "checked", "protocol": "grpc", "health_path": "/grpc.testing.TestService"})
	waitState("unhealthy")
	up.health.SetServingStatus("grpc.testing.TestService", healthpb.HealthCheckResponse_SERVING)
	waitState("healthy")
}

// TestGRPCStreamAcrossConfigChange: an open bidirectional stream keeps
// going while the configuration changes, its own service included.
func TestGRPCStreamAcrossConfigChange(t *testing.T) {
	g := testgw.Start(t, nil)
	enableH2C(t, g)
	up := startUpstream(t, "up", false)
	svc, route := grpcService(t, g, "stream", "grpc", up, nil)
	duplex, err := dial(t, g).FullDuplexCall(callCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	changes := []func(){
		func() { g.Route("other", g.DeadService("other"), map[string]any{"paths": []string{"/other"}}) },
		func() {
			g.Must("POST", "/api/v1/plugins", map[string]any{"type": "request-id", "scope": "route", "route_id": route})
		},
		func() {
			g.Must("PUT", fmt.Sprintf("/api/v1/services/%d", svc), map[string]any{"name": "stream", "protocol": "grpc", "retries": 3})
		},
	}
	for i := 0; i <= len(changes); i++ {
		body := []byte("message " + strconv.Itoa(i))
		if err := duplex.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: body}}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		m, err := duplex.Recv()
		if err != nil || !bytes.Equal(m.GetPayload().GetBody(), body) {
			t.Fatalf("message %d after %d changes: %v", i, i, err)
		}
		if i < len(changes) {
			changes[i]()
		}
	}
	if err := duplex.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := duplex.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("stream end: %v", err)
	}
}
