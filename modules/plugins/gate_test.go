package plugins

import (
	"net/http"
	"slices"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

type named string

func (named) ServeHTTP(http.ResponseWriter, *http.Request, caddyhttp.Handler) error { return nil }

type gate struct{ named }

func (gate) GatesAccess() {}

type store struct{ named }

func (store) AnswersFromStore() {}

func names(hs []caddyhttp.MiddlewareHandler) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		switch h := h.(type) {
		case named:
			out[i] = string(h)
		case gate:
			out[i] = "gate:" + string(h.named)
		case store:
			out[i] = "cache:" + string(h.named)
		}
	}
	return out
}

func TestArrange(t *testing.T) {
	for _, tc := range []struct {
		in   []caddyhttp.MiddlewareHandler
		want []string
	}{
		{nil, []string{}},
		{[]caddyhttp.MiddlewareHandler{named("id"), gate{"key"}, store{"c"}, named("tr")}, []string{"id", "gate:key", "cache:c", "tr"}},
		{[]caddyhttp.MiddlewareHandler{store{"c"}, named("id")}, []string{"cache:c", "id"}},
		{[]caddyhttp.MiddlewareHandler{store{"c"}, named("id"), gate{"ip"}, named("rl"), gate{"key"}, named("tr")},
			[]string{"id", "gate:ip", "rl", "gate:key", "cache:c", "tr"}},
		{[]caddyhttp.MiddlewareHandler{named("id"), store{"c"}, gate{"key"}}, []string{"id", "gate:key", "cache:c"}},
	} {
		in := slices.Clone(tc.in)
		if got := names(Arrange(tc.in)); !slices.Equal(got, tc.want) {
			t.Errorf("Arrange(%v) = %v, want %v", names(tc.in), got, tc.want)
		}
		if !slices.Equal(names(in), names(tc.in)) {
			t.Errorf("Arrange changed its argument")
		}
	}
}
