package memtest

import "testing"

var sink []byte

func TestAllocated(t *testing.T) {
	n := Allocated(func() { sink = make([]byte, 8<<20) })
	if n < 8<<20 || n > 9<<20 {
		t.Fatalf("an 8 MiB slice counted as %d bytes", n)
	}
	if n := Allocated(func() {}); n > 64<<10 {
		t.Fatalf("nothing counted as %d bytes", n)
	}
}
