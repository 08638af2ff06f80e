// Package regexsize bounds the regular expressions editors write (route
// path patterns, response-body-transform patterns) by the size of the
// program they compile to, before they are compiled.
//
// Go's regexp runs in time linear in its input, but the program of an
// expression can be far larger than its text: a counted repetition is
// that many copies of what it repeats, so the 4,090 characters
// "/.{1000}.{1000}…" compile to about 585,000 instructions (a fifth of a
// second of CPU and some 25 MB of memory for each compilation), and the
// regexp package itself only refuses programs from about 3.3 million
// instructions (128 MB). The memory is kept for as long as the route or
// plugin lives, and matching time grows with the program too.
package regexsize

import (
	"fmt"
	"regexp/syntax"
)

// MaxProgram is the most instructions an editor's regular expression may
// compile to: about what a 4,096-character expression without counted
// repetition can reach (roughly two per character), so only a counted
// repetition can exceed it.
const MaxProgram = 10000

// Check parses expr as regexp.Compile does (Perl syntax) and returns an
// error when its program would have more than MaxProgram instructions, or
// the parse error. It does not compile expr.
func Check(expr string) error {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return err
	}
	if n := Size(re); n > MaxProgram {
		return fmt.Errorf("expression too large: it compiles to about %d instructions, at most %d are allowed (a counted repetition such as x{100} is that many copies of x)", n, MaxProgram)
	}
	return nil
}

// Size estimates the number of instructions re compiles to, the way the
// regexp/syntax parser does for its own (much larger) limit: a repetition
// x{n,m} counts m copies of x.
func Size(re *syntax.Regexp) int64 {
	var n int64
	switch re.Op {
	case syntax.OpLiteral:
		n = int64(len(re.Rune))
	case syntax.OpCapture, syntax.OpStar:
		n = 2 + Size(re.Sub[0])
	case syntax.OpPlus, syntax.OpQuest:
		n = 1 + Size(re.Sub[0])
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			n += Size(sub)
		}
	case syntax.OpAlternate:
		for _, sub := range re.Sub {
			n += Size(sub)
		}
		n += int64(len(re.Sub)) - 1
	case syntax.OpRepeat:
		sub := Size(re.Sub[0])
		switch {
		case re.Max == -1 && re.Min == 0:
			n = 2 + sub // x*
		case re.Max == -1:
			n = 1 + int64(re.Min)*sub // xx…x+
		default:
			n = int64(re.Max)*sub + int64(re.Max-re.Min) // xx(x(x)?)?
		}
	}
	return max(1, n)
}
