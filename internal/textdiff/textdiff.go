// Package textdiff shows where two texts differ, line by line, for the
// failure messages of tests that compare generated text with a committed
// copy (golden files, generated docs).
package textdiff

import (
	"strconv"
	"strings"
)

// Lines returns the first most lines (numbered from 1) where want and got
// differ, each as "line N:\n- <want's>\n+ <got's>\n"; "" when they are the
// same. A text shorter than the other has empty lines past its end.
func Lines(want, got string, most int) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < most; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			b.WriteString("line " + strconv.Itoa(i+1) + ":\n- " + wl + "\n+ " + gl + "\n")
			shown++
		}
	}
	return b.String()
}
