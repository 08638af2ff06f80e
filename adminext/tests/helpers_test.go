package tests

import "github.com/caddyserver/caddy/v2"

func stopGateway() error { return caddy.Stop() }
