package configref

import (
	"strings"
	"testing"
)

func TestPutGetRetainDrop(t *testing.T) {
	r1 := Put(1, "secret", "one")
	r2 := Put(2, "secret", "two")
	if r1 != "1/secret" {
		t.Fatalf("ref %q", r1)
	}
	if v, err := Get[string](r2); err != nil || v != "two" {
		t.Fatalf("Get: %q %v", v, err)
	}
	if _, err := Get[int](r2); err == nil || !strings.Contains(err.Error(), "holds string") {
		t.Fatalf("wrong type: %v", err)
	}
	Retain(2)
	if _, ok := Lookup(r1); ok {
		t.Fatal("version 1 kept after Retain(2)")
	}
	Drop(2)
	if _, err := Get[string](r2); err == nil {
		t.Fatal("version 2 kept after Drop(2)")
	}
	for _, bad := range []string{"", "x", "x/y", "1", "/a"} {
		if _, ok := Lookup(bad); ok {
			t.Fatalf("Lookup(%q) found something", bad)
		}
	}
	if n := len(Versions()); n != 0 {
		t.Fatalf("%d versions left", n)
	}
}
