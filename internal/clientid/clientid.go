// Package clientid is the gateway's one identity of a client address for
// counting (the rate-limit plugin's ip keys, the admin API's failed-login
// limiter): an IPv4-mapped IPv6 address is its IPv4 address, and an IPv6
// address counts by its prefix (a /64 by default: one subscriber's
// network, whose addresses a client changes at will), so that neither
// spelling nor a fresh address of the same network starts a fresh count.
package clientid

import "net/netip"

// DefaultIPv6Prefix is the prefix length an IPv6 client counts by unless
// configured otherwise.
const DefaultIPv6Prefix = 64

// Key is the counting identity of the client address ip (as
// AppendKey).
func Key(ip string, ipv6Prefix int) string {
	return string(AppendKey(nil, ip, ipv6Prefix))
}

// AppendKey appends the counting identity of the client address ip to dst:
// an IPv4 address (mapped or not) as dotted quad, an IPv6 address as its
// prefix of ipv6Prefix bits (DefaultIPv6Prefix when out of 1..128), for
// example 2001:db8:1:2::/64; anything that is not an address as it is. It
// allocates nothing when dst has room.
func AppendKey(dst []byte, ip string, ipv6Prefix int) []byte {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return append(dst, ip...)
	}
	if a.Is4In6() || a.Is4() {
		return a.Unmap().AppendTo(dst)
	}
	if ipv6Prefix < 1 || ipv6Prefix > 128 {
		ipv6Prefix = DefaultIPv6Prefix
	}
	// The zone names an interface of this host, not part of the client.
	p, _ := a.WithZone("").Prefix(ipv6Prefix)
	return p.AppendTo(dst)
}
