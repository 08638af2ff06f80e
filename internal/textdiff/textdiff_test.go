package textdiff

import "testing"

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
}
