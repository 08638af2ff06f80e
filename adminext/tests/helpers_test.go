package tests

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
)

func stopGateway() error { return caddy.Stop() }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
