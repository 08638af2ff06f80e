package app

import (
	"net/url"
	"strings"

	"go.uber.org/zap"

	"github.com/caddy-gateway/gateway/app/auth"
	"github.com/caddy-gateway/gateway/app/controlplane"
)

// logSummary is the startup summary: where the proxy and the admin API
// listen, the dashboard's URL, the store and the live config version, and
// a warning while the admin API is open to anyone who reaches it.
func logSummary(cp *controlplane.ControlPlane) {
	log := cp.Logger()
	admin := cp.AdminAddr()
	fields := []zap.Field{
		zap.String("proxy_http", orOff(cp.ProxyAddr(false))),
		zap.String("proxy_https", orOff(cp.ProxyAddr(true))),
		zap.String("admin_api", admin),
		zap.String("dashboard", "http://"+admin+"/"),
		zap.String("store", storeName(cp.Boot())),
		zap.Int64("config_version", cp.AppliedConfigVersion()),
	}
	log.Info("gateway ready", fields...)
	open, err := auth.Open(cp.Store().DB)
	if err != nil {
		log.Error("reading the admin authentication state", zap.Error(err))
		return
	}
	if open {
		log.Warn("the admin API is open: anyone who can reach it can change the gateway; create the first admin user in the dashboard or set an admin token",
			zap.String("create_admin", "http://"+admin+"/#users/new"))
	}
}

func orOff(addr string) string {
	if addr == "" {
		return "off"
	}
	return addr
}

// storeName names the store without its credentials: the SQLite file, or
// PostgreSQL's host and database.
func storeName(b controlplane.Bootstrap) string {
	dsn := b.StoreDSN()
	if b.Database != "postgres" {
		return "sqlite " + dsn
	}
	if u, err := url.Parse(dsn); err == nil && u.Host != "" {
		return "postgres " + u.Host + u.Path
	}
	var host, db string
	for _, kv := range strings.Fields(dsn) {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "host":
			host = v
		case "dbname":
			db = v
		}
	}
	return strings.TrimSpace("postgres " + host + "/" + db)
}
