package wat

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// Numeric literals of the text format: integers (decimal or 0x hex, optional
// sign, '_' between digits) and floats (decimal or hex with a 'p' exponent,
// inf, nan, nan:0x payload).

var errSyntax = errors.New("malformed number")

// digits checks that s is a non-empty run of digits of the base with single
// underscores only between digits, and returns it without the underscores.
func digits(s string, hex bool) (string, bool) {
	if s == "" {
		return "", false
	}
	var b strings.Builder
	prevDigit := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_':
			if !prevDigit || i == len(s)-1 {
				return "", false
			}
			prevDigit = false
			continue
		case c >= '0' && c <= '9', hex && isHex(c):
			prevDigit = true
			b.WriteByte(c)
		default:
			return "", false
		}
	}
	return b.String(), true
}

func cutSign(s string) (neg bool, rest string, signed bool) {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		return s[0] == '-', s[1:], true
	}
	return false, s, false
}

// parseUint parses an unsigned integer literal (no sign) of at most 64 bits.
func parseUint(s string) (uint64, error) {
	hex := false
	if strings.HasPrefix(s, "0x") {
		hex, s = true, s[2:]
	}
	d, ok := digits(s, hex)
	if !ok {
		return 0, errSyntax
	}
	base := 10
	if hex {
		base = 16
	}
	v, err := strconv.ParseUint(d, base, 64)
	if err != nil {
		return 0, errors.New("integer constant out of range")
	}
	return v, nil
}

// parseInt parses an integer literal for an iN.const: it may be signed
// (-2^(N-1) .. 2^(N-1)-1) or unsigned (0 .. 2^N-1). The result is the
// two's complement bit pattern.
func parseInt(s string, bits int) (uint64, error) {
	neg, rest, _ := cutSign(s)
	v, err := parseUint(rest)
	if err != nil {
		return 0, err
	}
	if neg {
		if v > 1<<(bits-1) {
			return 0, errors.New("integer constant out of range")
		}
		v = -v
	} else if bits < 64 && v >= 1<<bits {
		return 0, errors.New("integer constant out of range")
	}
	if bits < 64 {
		v &= 1<<bits - 1
	}
	return v, nil
}

// parseFloat parses a float literal and returns the IEEE 754 bit pattern of
// the f32 (bits 32) or f64 (bits 64) it denotes, rounded to nearest even.
func parseFloat(s string, bits int) (uint64, error) {
	neg, rest, _ := cutSign(s)
	var signBit uint64 = 1 << 63
	expBits, mantBits := uint64(0x7FF), 52
	if bits == 32 {
		signBit, expBits, mantBits = 1<<31, 0xFF, 23
	}
	sign := uint64(0)
	if neg {
		sign = signBit
	}
	switch {
	case rest == "inf":
		return sign | expBits<<mantBits, nil
	case rest == "nan":
		return sign | expBits<<mantBits | 1<<(mantBits-1), nil
	case strings.HasPrefix(rest, "nan:0x"):
		d, ok := digits(rest[6:], true)
		if !ok {
			return 0, errSyntax
		}
		p, err := strconv.ParseUint(d, 16, 64)
		if err != nil || p == 0 || p >= 1<<mantBits {
			return 0, errors.New("NaN payload out of range")
		}
		return sign | expBits<<mantBits | p, nil
	}

	// Check the spec's grammar (Go's parser is more liberal), drop underscores.
	hex := strings.HasPrefix(rest, "0x")
	body := rest
	if hex {
		body = rest[2:]
	}
	expChar := "eE"
	if hex {
		expChar = "pP"
	}
	mant, exp, hasExp := body, "", false
	if i := strings.IndexAny(body, expChar); i >= 0 {
		mant, exp, hasExp = body[:i], body[i+1:], true
	}
	intPart, frac, hasDot := strings.Cut(mant, ".")
	ip, ok := digits(intPart, hex)
	if !ok {
		return 0, errSyntax
	}
	clean := ip
	if hasDot {
		clean += "."
		if frac != "" {
			fp, ok := digits(frac, hex)
			if !ok {
				return 0, errSyntax
			}
			clean += fp
		}
	}
	if hasExp {
		eneg, e, _ := cutSign(exp)
		ed, ok := digits(e, false)
		if !ok {
			return 0, errSyntax
		}
		if eneg {
			ed = "-" + ed
		}
		clean += expChar[:1] + ed
	} else if hex {
		clean += "p0" // Go requires the exponent of a hex float
	}
	if hex {
		clean = "0x" + clean
	}
	if neg {
		clean = "-" + clean
	}
	f, err := strconv.ParseFloat(clean, bits)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
			return 0, errors.New("float constant out of range")
		}
		return 0, errSyntax
	}
	if bits == 32 {
		return uint64(math.Float32bits(float32(f))), nil
	}
	return math.Float64bits(f), nil
}
