package schema

import (
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
