package plugins

import (
	"strings"
	"testing"
)

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
