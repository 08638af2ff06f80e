package storage

import "testing"

// Route hosts: names, wildcards and IP literals, IPv6 ones bare or in
// brackets (the router compares hosts without brackets or port); nothing
// with a scheme, port, path, zone or unbalanced bracket.
func TestValidateHostPattern(t *testing.T) {
	for _, h := range []string{"example.com", "*.example.com", "127.0.0.1", "::1", "[::1]", "2001:db8::7", "[2001:db8::7]"} {
		if err := ValidateHostPattern(h); err != nil {
			t.Errorf("%q refused: %v", h, err)
		}
	}
	for _, h := range []string{"", "*.", "a*.example.com", "example.com:8080", "http://example.com", "a b", "[::1]:8080", "[::1", "::1]",
		"*.::1", "fe80::1%eth0", "[fe80::1%eth0]", "::ffff:zz", "127.0.0.1:80"} {
		if err := ValidateHostPattern(h); err == nil {
			t.Errorf("%q accepted", h)
		}
	}
}
