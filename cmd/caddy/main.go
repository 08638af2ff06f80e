// Command caddy is Caddy with its standard modules plus the Caddy Gateway
// bundle, built with plain `go build` (make build → bin/caddy). Its test
// is app/tests/binary_test.go, which builds and runs it.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	// Caddy's standard modules.
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	// The gateway bundle: every module of this repository.
	_ "github.com/caddy-gateway/gateway"
)

func main() {
	caddycmd.Main()
}
