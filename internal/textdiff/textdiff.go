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
// same. A text shorter than the other has empty lines past its end, so
// texts that differ only in their trailing newlines have no such line:
// Lines says so instead.
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
	if want != got && strings.TrimRight(want, "\n") == strings.TrimRight(got, "\n") {
		return "the texts differ only in trailing newlines: want ends with " + strconv.Itoa(trailingNewlines(want)) +
			", got with " + strconv.Itoa(trailingNewlines(got)) + "\n"
	}
	return b.String()
}

func trailingNewlines(s string) int {
	return len(s) - len(strings.TrimRight(s, "\n"))
}
