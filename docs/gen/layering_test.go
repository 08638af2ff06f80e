package main

import (
	"strings"
	"testing"
)

const modulePath = "github.com/caddy-gateway/gateway"

// layers are the module's layers, top first (docs/architecture.md): a
// package may import packages of its own layer and of the layers below it,
// never of a layer above. Library packages (internal/) and the declaration
// engine (schema) share the bottom layer.
var layers = [][]string{
	{"cmd", "bench", "docs"}, // commands and tools
	{"."},                    // the module bundle, imported by cmd/caddy
	{"caddyfile"},
	{"app"},
	{"storage"},
	{"modules"},
	{"internal", "schema"},
}

// testSupport are packages imported only by tests, which start a whole
// gateway and so may import any layer; production code must not import
// them.
var testSupport = map[string]bool{
	"app/internal/testgw": true,
}

// layerOf is the index in layers of a package's folder, -1 when no layer
// claims it.
func layerOf(dir string) int {
	for i, l := range layers {
		for _, top := range l {
			if dir == top || (top != "." && strings.HasPrefix(dir, top+"/")) {
				return i
			}
		}
	}
	return -1
}

// TestLayering fails when a package's non-test code imports a package of a
// layer above its own, or a test-support package.
func TestLayering(t *testing.T) {
	pkgs, err := modulePackages("../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 40 {
		t.Fatalf("only %d packages found: is the walk rooted at the module?", len(pkgs))
	}
	for _, p := range pkgs {
		from := layerOf(p.Dir)
		if from < 0 {
			t.Errorf("%s belongs to no layer: add its top folder to layers (and docs/architecture.md)", p.Dir)
			continue
		}
		if testSupport[p.Dir] {
			continue
		}
		for _, imp := range p.Imports {
			if imp != modulePath && !strings.HasPrefix(imp, modulePath+"/") {
				continue
			}
			dir := strings.TrimPrefix(strings.TrimPrefix(imp, modulePath), "/")
			if dir == "" {
				dir = "."
			}
			if testSupport[dir] {
				t.Errorf("%s imports the test-support package %s", p.Dir, dir)
				continue
			}
			if to := layerOf(dir); to < from {
				t.Errorf("%s (layer %v) imports %s (layer %v, above it)", p.Dir, layers[from], dir, layers[to])
			}
		}
	}
}

// TestLayeringCatchesAnUpwardImport keeps TestLayering able to fail: the
// layer order it checks against puts storage above modules, and app above
// storage.
func TestLayeringCatchesAnUpwardImport(t *testing.T) {
	if !(layerOf("modules/pgstorage") > layerOf("storage") && layerOf("storage") > layerOf("app/compiler") && layerOf("schema") > layerOf("modules/router")) {
		t.Fatal("layers are not ordered app → storage → modules → schema")
	}
}
