package app

import (
	"github.com/caddy-gateway/gateway/app/api"
	"github.com/caddy-gateway/gateway/app/apps"
	"github.com/caddy-gateway/gateway/app/auth"
	"github.com/caddy-gateway/gateway/app/backup"
	"github.com/caddy-gateway/gateway/app/certs"
	"github.com/caddy-gateway/gateway/app/cluster"
	"github.com/caddy-gateway/gateway/app/controlplane"
	"github.com/caddy-gateway/gateway/app/dashboard"
	"github.com/caddy-gateway/gateway/app/observe"
	"github.com/caddy-gateway/gateway/app/pluginapi"
	"github.com/caddy-gateway/gateway/app/resources"
	"github.com/caddy-gateway/gateway/app/wasmapi"
	"github.com/caddy-gateway/gateway/storage"
)

// features lists the admin API's endpoint sets: every feature of the
// gateway's admin API, given explicitly. rec is the control plane's request
// recorder (nil when the endpoints are only listed).
func features(rec *observe.Recorder) [][]*api.Endpoint {
	return [][]*api.Endpoint{
		api.DocEndpoints(),
		resources.Endpoints(),
		observe.Endpoints(rec),
		pluginapi.Endpoints(),
		certs.Endpoints(),
		apps.Endpoints(),
		backup.Endpoints(),
		wasmapi.Endpoints(),
		auth.Endpoints(),
		dashboard.Endpoints(),
		cluster.Endpoints(),
	}
}

// withFeatures equips a new control plane: the store gets the
// certificates' and wasm modules' tables and loads the modules the wasm
// plugins run, wasm plugins get their module references, rate limits
// their shared stores, the request recorder observes the proxied traffic,
// the certificates compile into the tls app, and the admin API serves the
// features with the admin authentication.
func withFeatures(cp *controlplane.ControlPlane) error {
	for _, t := range []storage.OwnedTable{certs.Table, wasmapi.Table} {
		if err := cp.Store().AddTable(t); err != nil {
			return err
		}
	}
	cp.Store().AddSnapshotLoader(wasmapi.LoadSources)
	cp.AddPluginRefs(wasmapi.PluginType, wasmapi.PluginRefs)
	cp.AddPluginRefs("rate-limit", cluster.RateLimitRefs)
	if err := cluster.ConfigureRateLimits(cp); err != nil {
		return err
	}
	rec := observe.NewRecorder(cp)
	a, err := api.New(cp, auth.New, flatten(features(rec)))
	if err != nil {
		return err
	}
	cp.SetObserver(rec)
	cp.AddCompileStep(certs.Compile(cp.Boot))
	cp.SetAdmin(a)
	cp.SetReadyHook(func() { logSummary(cp) })
	cp.AddService(cluster.Start)
	cp.AddService(certs.Events)
	return nil
}

// DeclaredEndpoints lists every endpoint of the features (as a running API
// serves them, by path), without a control plane: for generated
// documentation (docs/gen writes docs/endpoints.md from it) and tests.
func DeclaredEndpoints() []*api.Endpoint {
	return api.SortEndpoints(flatten(features(nil)))
}

func flatten(sets [][]*api.Endpoint) []*api.Endpoint {
	var eps []*api.Endpoint
	for _, set := range sets {
		eps = append(eps, set...)
	}
	return eps
}
