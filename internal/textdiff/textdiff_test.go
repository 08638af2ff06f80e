package textdiff

import (
	"strings"
	"testing"
)

func TestLines(t *testing.T) {
	if d := Lines("a\nb", "a\nb", 5); d != "" {
		t.Errorf("same texts: %q", d)
	}
	if d, want := Lines("a\nb\nc\nd", "a\nB\nc\nD\ne", 2), "line 2:\n- b\n+ B\nline 4:\n- d\n+ D\n"; d != want {
		t.Errorf("got %q, want %q", d, want)
	}
	if d, want := Lines("a", "a\ne", 5), "line 2:\n- \n+ e\n"; d != want {
		t.Errorf("longer got: %q, want %q", d, want)
	}
	for _, c := range [][2]string{{"a", "a\n"}, {"a\n\n", "a\n"}, {"", "\n"}} {
		if d, want := Lines(c[0], c[1], 5), "the texts differ only in trailing newlines"; !strings.HasPrefix(d, want) {
			t.Errorf("%q vs %q: %q, want it to start with %q", c[0], c[1], d, want)
		}
	}
	if d, want := Lines("a", "a\n", 5), "the texts differ only in trailing newlines: want ends with 0, got with 1\n"; d != want {
		t.Errorf("got %q, want %q", d, want)
	}
}
