package tests

import (
	"reflect"
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/app/apps"
	"github.com/caddy-gateway/gateway/app/auth"
	"github.com/caddy-gateway/gateway/app/backup"
	"github.com/caddy-gateway/gateway/app/certs"
	"github.com/caddy-gateway/gateway/app/pluginapi"
	"github.com/caddy-gateway/gateway/app/wasmapi"
	"github.com/caddy-gateway/gateway/modules/plugins"
	"github.com/caddy-gateway/gateway/storage"
)

// inputDeclarations are the declarations of the admin API's request bodies
// (plugin configs are added from the registry).
func inputDeclarations() map[string]any {
	decls := map[string]any{
		"Service": storage.Service{}, "Target": storage.Target{}, "Route": storage.Route{}, "StreamRoute": storage.StreamRoute{},
		"Plugin": storage.Plugin{}, "Consumer": storage.Consumer{}, "Settings": storage.Settings{},
		"Credential": pluginapi.Credential{}, "Certificate": certs.Certificate{}, "User": auth.User{},
		"WasmModule": wasmapi.Module{}, "ApplicationSpec": apps.ApplicationSpec{},
		"backup.DocumentCredential": backup.DocumentCredential{},
	}
	for _, t := range plugins.Types() {
		decls["plugin "+t.Name] = t.New()
	}
	return decls
}

// Every integer of every input declaration has an upper bound in its
// schema tag (or a 32-bit type), except ids, whose bound is their type: a
// number that cannot be compiled must be a 400, not a stored value.
func TestEveryIntegerIsBounded(t *testing.T) {
	for name, d := range inputDeclarations() {
		walkFields(reflect.TypeOf(d), name, func(path string, sf reflect.StructField, ft reflect.Type) {
			tag := "," + sf.Tag.Get("schema") + ","
			if strings.Contains(tag, ",readonly,") || strings.Contains(tag, ",internal,") || strings.Contains(tag, ",enum=") {
				return
			}
			json, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			if json == "id" || strings.HasSuffix(json, "_id") || strings.HasSuffix(json, "_ids") {
				return
			}
			switch ft.Kind() {
			case reflect.Int, reflect.Int64, reflect.Uint, reflect.Uint64:
				if !strings.Contains(tag, ",max=") {
					t.Errorf("%s: integer without max", path)
				}
			}
		})
	}
}

// walkFields calls fn for every field of t's struct (nested structs, items
// of slices and values of maps included), with the field's element type.
func walkFields(t reflect.Type, path string, fn func(string, reflect.StructField, reflect.Type)) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return
	}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() || sf.Tag.Get("json") == "-" {
			continue
		}
		ft := sf.Type
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice || ft.Kind() == reflect.Map {
			ft = ft.Elem()
		}
		p := path + "." + sf.Name
		if sf.Anonymous {
			walkFields(ft, path, fn)
			continue
		}
		fn(p, sf, ft)
		if ft.Kind() == reflect.Struct && ft.PkgPath() != "time" {
			walkFields(ft, p, fn)
		}
	}
}
