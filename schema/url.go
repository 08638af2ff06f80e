package schema

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// HTTPURL parses s as an absolute http or https URL that can be dialled:
// a host (HostName's rules), a port from 1 to 65535 when one is given, and
// no fragment. It is the rule of the url kind, and of fields that take a
// URL beside other forms (an ACME directory alias). Field-specific rules
// (https only, no credentials, no query) stay with the field.
func HTTPURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, errors.New("must be an absolute http or https URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, errors.New("must be an absolute http or https URL (scheme http or https)")
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, errors.New("must be an absolute http or https URL (http://host/…)")
	}
	if u.Fragment != "" || strings.HasSuffix(s, "#") {
		return nil, errors.New("must not have a fragment (#…)")
	}
	if u.Hostname() == "" {
		return nil, errors.New("must have a host (http://host/…)")
	}
	if err := HostName(u.Hostname()); err != nil {
		return nil, fmt.Errorf("host %q %v", u.Hostname(), err)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("has port %s: a port is 1 to 65535", p)
		}
	}
	return u, nil
}

// HostName checks a host a connection is made to (a URL's or a target's):
// an IP address, or a DNS name of labels of letters, digits, '-' and '_'
// (other than ASCII allowed, for internationalized names) with an optional
// trailing dot. A name whose last label is a number (127.1, 2130706433,
// 0x7f000001, 0177.0.0.1) is refused: some resolvers read it as an IPv4
// address and Go's does not, so it would name one address to one program
// and none, or another, to the next (the WHATWG URL standard reads it as
// an address too).
func HostName(h string) error {
	if h == "" {
		return errors.New("must not be empty")
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return nil
	}
	name := strings.TrimSuffix(h, ".")
	if len(name) > 253 {
		return errors.New("must be at most 253 characters")
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return errors.New("must be an IP address or a DNS name (labels of 1 to 63 characters)")
		}
		for i := 0; i < len(l); i++ {
			if c := l[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c >= 0x80) {
				return fmt.Errorf("must be an IP address or a DNS name (%q is not allowed)", c)
			}
		}
	}
	if numeric(labels[len(labels)-1]) {
		return errors.New("must be an IPv4 address in standard form (four decimal numbers: 127.0.0.1) or a DNS name whose last label is not a number")
	}
	return nil
}

// numeric reports a label the WHATWG URL parser reads as a number: decimal
// digits, or 0x followed by hex digits (none included).
func numeric(l string) bool {
	if len(l) >= 2 && l[0] == '0' && (l[1] == 'x' || l[1] == 'X') {
		return strings.Trim(l[2:], "0123456789abcdefABCDEF") == ""
	}
	return strings.Trim(l, "0123456789") == ""
}
