package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/internal/textdiff"
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/schema"
)

// TestGeneratedDocsAreCurrent fails when docs/plugins.md or
// docs/endpoints.md is not what the declarations generate: a plugin field,
// bound, default or type, or an endpoint or its role, was changed without
// running `make docs`.
func TestGeneratedDocsAreCurrent(t *testing.T) {
	for name, gen := range files {
		committed, err := os.ReadFile("../" + name)
		if err != nil {
			t.Fatal(err)
		}
		if want := gen(); !bytes.Equal(committed, want) {
			t.Errorf("docs/%s is stale: run `make docs` (go run ./docs/gen) and commit the result (- committed, + generated)\n%s", name, textdiff.Lines(string(committed), string(want), 1))
		}
	}
}

// TestREADMEFolderTableIsCurrent fails when the README's folder table does
// not list exactly the module's packages with their package comments: a
// package was added, moved or redescribed without running `make docs`.
func TestREADMEFolderTableIsCurrent(t *testing.T) {
	committed, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := readmeWithFolders("../..")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(committed, want) {
		t.Errorf("README.md's folder table is stale: run `make docs` and commit the result (- committed, + generated)\n%s", textdiff.Lines(string(committed), string(want), 1))
	}
	pkgs, _ := modulePackages("../..")
	for _, p := range pkgs {
		if strings.TrimSpace(p.Doc) == "" {
			t.Errorf("%s has no package comment: the README's folder table takes its row from it", p.Dir)
		}
	}
}

// TestPluginsMarkdownCoversEveryType makes sure the reference names every
// registered type and each of its fields, so a generator bug cannot hide a
// type behind a matching stale file.
func TestPluginsMarkdownCoversEveryType(t *testing.T) {
	doc := string(render())
	types := plugins.Types()
	if len(types) < 10 {
		t.Fatalf("only %d plugin types registered: is the gateway bundle imported?", len(types))
	}
	for _, ty := range types {
		if !strings.Contains(doc, "\n## "+ty.Name+"\n") {
			t.Errorf("no section for %s", ty.Name)
		}
		for name := range jsonFields(ty.New()) {
			if !strings.Contains(doc, "| `"+name+"` |") {
				t.Errorf("%s: field %s not in the table", ty.Name, name)
			}
		}
	}
}

// jsonFields are the API fields of a declaration (those of embedded
// declarations included): not internal.
func jsonFields(v any) map[string]bool {
	out := map[string]bool{}
	rt := reflect.TypeOf(v).Elem()
	for name, i := range schema.FieldIndex(rt) {
		if !strings.Contains(rt.FieldByIndex(i).Tag.Get("schema"), "internal") {
			out[name] = true
		}
	}
	return out
}

// TestCodeCitesOnlyTheRepository fails when Go code cites the specification
// files that live outside the repository (a contributor cannot follow
// them): cite docs/ or the served OpenAPI document instead.
func TestCodeCitesOnlyTheRepository(t *testing.T) {
	banned := []string{"adden" + "dum §", "admin-api" + ".md"}
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, s := range banned {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s cites %q, which is not in the repository: cite docs/ or the OpenAPI document", path, s)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
