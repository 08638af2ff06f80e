package plugins

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// dispenser returns a dispenser on the first subdirective of the block of
// `directive { <sub> }`.
func dispenser(t *testing.T, sub string) *caddyfile.Dispenser {
	t.Helper()
	d := caddyfile.NewTestDispenser("directive {\n" + sub + "\n}")
	d.Next()
	if !d.NextBlock(0) {
		t.Fatalf("no subdirective in %q", sub)
	}
	return d
}

func TestIntArg(t *testing.T) {
	for sub, want := range map[string]string{
		"ttl_s 30":    "",
		"ttl_s":       "wrong argument count",
		"ttl_s x":     `ttl_s: strconv.ParseInt: parsing "x"`,
		"ttl_s 1e400": "ttl_s: strconv.ParseInt",
	} {
		n, err := IntArg(dispenser(t, sub))
		if want == "" {
			if err != nil || n != 30 {
				t.Errorf("%q: %d %v", sub, n, err)
			}
		} else if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", sub, err, want)
		}
	}
}

func TestBoolArg(t *testing.T) {
	for sub, want := range map[string]bool{"hide": true, "hide true": true, "hide false": false, "hide 0": false} {
		if got, err := BoolArg(dispenser(t, sub)); err != nil || got != want {
			t.Errorf("%q: %v %v, want %v", sub, got, err, want)
		}
	}
	for sub, want := range map[string]string{
		"hide maybe": `hide: strconv.ParseBool: parsing "maybe"`,
		"hide 1 2":   "wrong argument count",
	} {
		if _, err := BoolArg(dispenser(t, sub)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", sub, err, want)
		}
	}
}

func TestInstanceKey(t *testing.T) {
	type cfg struct{ Limit int }
	if got := InstanceKey(42, cfg{1}); got != "id:42" {
		t.Errorf("with id: %q", got)
	}
	a, b, c := InstanceKey(0, cfg{1}), InstanceKey(0, cfg{1}), InstanceKey(0, cfg{2})
	if !strings.HasPrefix(a, "cfg:") || a != b || a == c {
		t.Errorf("standalone keys %q %q %q: want equal for equal settings only", a, b, c)
	}
}
