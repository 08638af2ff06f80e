package gwproxy

import (
	"testing"
	"time"
)

func TestParseGRPCTimeout(t *testing.T) {
	for v, want := range map[string]time.Duration{
		"1S": time.Second, "250m": 250 * time.Millisecond, "2H": 2 * time.Hour, "99999999H": maxGRPCTimeout, "5n": 5,
	} {
		if got, ok := ParseGRPCTimeout(v); !ok || got != want {
			t.Errorf("%q: %v %v, want %v", v, got, ok, want)
		}
	}
	for _, v := range []string{"", "S", "1", "1x", "-1S", "123456789S", "1.5S"} {
		if _, ok := ParseGRPCTimeout(v); ok {
			t.Errorf("%q parsed", v)
		}
	}
	if got := FormatGRPCTimeout(1500 * time.Microsecond); got != "2m" {
		t.Errorf("format: %q", got)
	}
}
