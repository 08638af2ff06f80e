package controlplane

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/caddy-gateway/gateway/app/compiler"
	"github.com/caddy-gateway/gateway/internal/configref"
	"github.com/caddy-gateway/gateway/storage"
)

// compile turns a store snapshot into the full Caddy config to load
// (package compiler): the captured base config with the gateway app
// replaced by the compiled one.
//
// Secrets and tables that must not be readable from Caddy's admin endpoint
// are put into package configref under the new version and referenced from
// the config; the caller keeps or drops them with the load's outcome
// (ControlPlane.load).
//
// The routing table is updated from the snapshot's changed routes: the
// live config's table (cp.table) is the starting point, and the compiled
// one becomes it when its config goes live (ControlPlane.load).
// AddCompileStep adds a feature's compile step (before the first
// Activate): the certificates' tls app is compiled by app/certs.
func (cp *ControlPlane) AddCompileStep(step compiler.Step) { cp.steps = append(cp.steps, step) }

func (cp *ControlPlane) compile(snap *storage.Snapshot) (*compiler.Compiled, int64, error) {
	version := cp.version.Add(1)
	if cp.base == nil {
		return nil, 0, ErrNoBase
	}
	bootstrap := cp.Boot()
	boot, err := json.Marshal(bootstrap)
	if err != nil {
		return nil, 0, fmt.Errorf("encoding the gateway bootstrap: %w", err)
	}
	certStorage, err := cp.compileStorage()
	if err != nil {
		return nil, 0, err
	}
	out, err := compiler.Config(snap, compiler.Options{
		Version:         version,
		Previous:        cp.table,
		Proxies:         cp.liveProxies,
		Pool:            cp.proxies,
		NodeHTTPListen:  bootstrap.NodeHTTPListen,
		NodeHTTPSListen: bootstrap.NodeHTTPSListen,
		Storage:         certStorage,
		Now:             time.Now().UTC(),
		Bootstrap:       boot,
		Base:            cp.base,
		Steps:           cp.steps,
		PluginInternals: cp.pluginInternals(),
	})
	if err != nil {
		configref.Drop(version)
		return nil, 0, err
	}
	return out, version, nil
}
