package guard

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync/atomic"
)

// ErrLinkLocal is the error of a refused link-local or cloud metadata
// destination.
var ErrLinkLocal = errors.New("link-local and cloud metadata addresses are refused unless settings allow_link_local_destinations is true")

// linkLocalAllowed is the live config's allow_link_local_destinations
// setting (AllowLinkLocal).
var linkLocalAllowed atomic.Bool

// AllowLinkLocal sets whether outbound connections and configured
// addresses may be link-local or cloud metadata destinations. The control
// plane sets it from the settings of the config that goes live.
func AllowLinkLocal(allow bool) { linkLocalAllowed.Store(allow) }

// LinkLocalAllowed reports the current AllowLinkLocal setting.
func LinkLocalAllowed() bool { return linkLocalAllowed.Load() }

// Link-local networks and the cloud providers' instance metadata services
// that sit outside them: a target, collector or probe there would hand the
// instance's credentials to whoever can send a request through the proxy.
var linkLocalPrefixes = []netip.Prefix{
	netip.MustParsePrefix("169.254.0.0/16"),     // IPv4 link-local: AWS, GCP, Azure, OCI metadata at .169.254
	netip.MustParsePrefix("fe80::/10"),          // IPv6 link-local
	netip.MustParsePrefix("fd00:ec2::254/128"),  // AWS metadata over IPv6
	netip.MustParsePrefix("100.100.100.200/32"), // Alibaba Cloud metadata
}

// nat64 is the well-known NAT64 prefix (RFC 6052): 64:ff9b::a9fe:a9fe
// reaches 169.254.169.254 through a NAT64 gateway.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// IsLinkLocal reports whether ip is a link-local or cloud metadata
// destination (IPv4-mapped and NAT64 spellings of one too).
func IsLinkLocal(ip netip.Addr) bool {
	ip = ip.Unmap().WithZone("")
	if nat64.Contains(ip) {
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte(b[12:]))
	}
	for _, p := range linkLocalPrefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// forbiddenLinkLocal is the error for a dial to ip while link-local
// destinations are not allowed, or nil.
func forbiddenLinkLocal(ip netip.Addr) error {
	if linkLocalAllowed.Load() || !IsLinkLocal(ip) {
		return nil
	}
	return fmt.Errorf("%w (%s)", ErrLinkLocal, ip)
}

// CheckHost refuses a configured host that is literally a link-local or
// cloud metadata address while they are not allowed. Hostnames are not
// resolved here; the dial-time check (Control) covers them.
func CheckHost(host string) error {
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	if err != nil || linkLocalAllowed.Load() || !IsLinkLocal(ip) {
		return nil
	}
	return fmt.Errorf("must not be a link-local or cloud metadata address (%s) unless settings allow_link_local_destinations is true", host)
}
