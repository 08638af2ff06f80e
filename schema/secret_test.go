package schema

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

type secretDecl struct {
	URL     string            `json:"url" schema:"url,secret"`
	Token   string            `json:"token" schema:"secret"`
	Headers map[string]string `json:"headers" schema:"secret"`
	Plain   string            `json:"plain"`
}

func TestRedact(t *testing.T) {
	v := &secretDecl{URL: "https://u:p@h.example/x?q=1", Token: "t", Headers: map[string]string{"B": "2", "A": "1"}, Plain: "p"}
	names := Redact(v)
	if want := []string{"url", "token", "headers.A", "headers.B"}; !reflect.DeepEqual(names, want) {
		t.Errorf("names %v", names)
	}
	if v.URL != "https://<redacted>@h.example/x?q=<redacted>" || v.Token != Redacted || v.Headers["A"] != Redacted || v.Plain != "p" {
		t.Errorf("redacted %+v", v)
	}
	if got := RedactedFields(v); len(got) != 4 {
		t.Errorf("RedactedFields %v", got)
	}
	if err := Check(v); err == nil || !strings.Contains(err.Error(), "url") {
		t.Errorf("Check of a redacted value: %v", err)
	}
	// A key in the query, without user information; a parameter without
	// a value may be a bare key.
	q := &secretDecl{URL: "https://h.example/in?api_key=k1&k2&b=2"}
	if names := Redact(q); len(names) != 1 || q.URL != "https://h.example/in?api_key=<redacted>&<redacted>&b=<redacted>" {
		t.Errorf("%v %+v", names, q)
	}
	// Nothing secret to hide: unchanged.
	w := &secretDecl{URL: "https://h.example/"}
	if names := Redact(w); len(names) != 0 || w.URL != "https://h.example/" {
		t.Errorf("%v %+v", names, w)
	}
}

// An opaque JSON value declared secret (a wasm plugin's configuration) is
// redacted whole, as the JSON string "<redacted>"; null or none is left.
func TestRedactOpaqueJSON(t *testing.T) {
	type decl struct {
		Config json.RawMessage `json:"config" schema:"nullable,secret"`
	}
	v := &decl{Config: json.RawMessage(`{"api_key":"k","n":1}`)}
	if names := Redact(v); !reflect.DeepEqual(names, []string{"config"}) || string(v.Config) != `"<redacted>"` {
		t.Fatalf("%v %s", names, v.Config)
	}
	if !json.Valid(v.Config) {
		t.Fatalf("not JSON: %s", v.Config)
	}
	if err := Check(v); err == nil || !strings.Contains(err.Error(), "config") {
		t.Fatalf("Check of a redacted value: %v", err)
	}
	for _, none := range []string{"", "null", " null "} {
		w := &decl{Config: json.RawMessage(none)}
		if names := Redact(w); len(names) != 0 || string(w.Config) != none {
			t.Fatalf("%q: %v %s", none, names, w.Config)
		}
	}
}
