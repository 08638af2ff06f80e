package process

import "github.com/caddy-gateway/gateway/modules/streams"

// Streams owns the TCP stream-route listeners: they bind once per process
// (the spec) and must keep accepting across every config reload.
var Streams = streams.NewServer(Health)
