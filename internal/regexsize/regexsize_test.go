package regexsize

import (
	"regexp/syntax"
	"strings"
	"testing"
)

// TestSizeBoundsTheProgram: the estimate is never below the compiled
// program's instruction count, and Check refuses what compiles past
// MaxProgram while keeping ordinary expressions.
func TestSizeBoundsTheProgram(t *testing.T) {
	for _, expr := range []string{
		`/users/[0-9]+`, `/a{1,1000}b`, `(?i)/API/v[12]/(users|groups)/[^/]+$`,
		`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`,
		`(a|b|c)*x+y?z{3}`, `\pL{10,20}`, ``, `^$`, `(?:ab){2,}`, `(x{2}){3,5}`,
	} {
		re, err := syntax.Parse(expr, syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		prog, err := syntax.Compile(re.Simplify())
		if err != nil {
			t.Fatal(err)
		}
		if est := Size(re); est < int64(len(prog.Inst))-2 { // the program's fail and match instructions
			t.Errorf("%q: estimate %d below the program's %d instructions", expr, est, len(prog.Inst))
		}
		if err := Check(expr); err != nil {
			t.Errorf("%q refused: %v", expr, err)
		}
	}
	if err := Check("/" + strings.Repeat(".{1000}", 11)); err == nil || !strings.Contains(err.Error(), "too large") {
		t.Errorf("11,000 copies accepted: %v", err)
	}
	if err := Check("/" + strings.Repeat("(a|b)", 800)); err != nil {
		t.Errorf("a 4,001-character expression without counted repetition refused: %v", err)
	}
	if err := Check("a)(b"); err == nil {
		t.Error("a parse error passed")
	}
}
