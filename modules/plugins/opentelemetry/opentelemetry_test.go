package opentelemetry

import (
	"context"
	"net"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/caddy-gateway/gateway/modules/plugins/internal/plugintest"
)

// The Caddyfile directive takes every field, numbers with a fraction
// included.
func TestCaddyfile(t *testing.T) {
	plugintest.WantCaddyfile(t, `gateway_opentelemetry http://127.0.0.1:4318/v1/traces {
		sampling_ratio 0.25
		service_name edge
		header X-Key k
		resource_attributes deployment.environment test
		propagation w3c b3
		queue_size 100
	}`, `{"handler":"gateway_opentelemetry","endpoint":"http://127.0.0.1:4318/v1/traces","headers":{"X-Key":"k"},
		"sampling_ratio":0.25,"service_name":"edge","resource_attributes":{"deployment.environment":"test"},
		"propagation":["w3c","b3"],"queue_size":100}`)
	if _, err := plugintest.AdaptCaddyfile(t, "gateway_opentelemetry http://127.0.0.1:4318/v1/traces {\n sampling_ratio NaN\n}"); err == nil {
		t.Fatal("sampling_ratio NaN was accepted")
	}
	if _, err := plugintest.AdaptCaddyfile(t, "gateway_opentelemetry http://127.0.0.1:4318/v1/traces {\n sampling_ratio 2\n}"); err == nil {
		t.Fatal("sampling_ratio 2 was accepted")
	}
}

// A span that finds the queue full is dropped and counted at once, while
// the exporter waits for a collector that does not answer: the request
// ending it never waits; stopping the exporter counts what it could not
// send.
func TestFullQueueDrops(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	b, err := newBatcher("http://"+ln.Addr().String()+"/v1/traces", nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b))
	tr := tp.Tracer("test")
	before := Counts()
	end := func() {
		_, s := tr.Start(context.Background(), "s")
		s.End()
	}
	end()
	// The worker takes the span and, at the next tick, waits at the
	// collector.
	select {
	case c := <-accepted:
		defer c.Close()
	case <-time.After(30 * time.Second):
		t.Fatal("the exporter did not connect")
	}
	for i := 0; i < 10; i++ {
		end()
	}
	if got := Counts().DroppedQueueFull - before.DroppedQueueFull; got != 8 {
		t.Fatalf("%d spans dropped on a queue of 2 with 10 ended, want 8", got)
	}
	_ = b.Destruct()
	select {
	case <-b.done:
	case <-time.After(ExportTimeout + drainTimeout + 5*time.Second):
		t.Fatal("the exporter did not stop")
	}
	end() // after the stop: dropped
	c := Counts()
	if c.DroppedQueueFull-before.DroppedQueueFull != 9 || c.DroppedExportFailed-before.DroppedExportFailed != 3 {
		t.Fatalf("counts %+v, before %+v", c, before)
	}
}

func TestMain(m *testing.M) { plugintest.Main(m) }
