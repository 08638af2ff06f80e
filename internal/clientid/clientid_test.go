package clientid

import "testing"

func TestKey(t *testing.T) {
	for _, c := range []struct {
		ip     string
		prefix int
		want   string
	}{
		{"203.0.113.8", 64, "203.0.113.8"},
		{"::ffff:203.0.113.8", 64, "203.0.113.8"},
		{"::ffff:203.0.113.8", 128, "203.0.113.8"},
		{"2001:db8:1:2:3:4:5:6", 64, "2001:db8:1:2::/64"},
		{"2001:db8:1:2:ffff::1", 64, "2001:db8:1:2::/64"},
		{"2001:db8:1:2:3:4:5:6", 48, "2001:db8:1::/48"},
		{"2001:db8:1:2:3:4:5:6", 128, "2001:db8:1:2:3:4:5:6/128"},
		{"2001:db8:1:2:3:4:5:6", 0, "2001:db8:1:2::/64"},
		{"2001:db8:1:2:3:4:5:6", 129, "2001:db8:1:2::/64"},
		{"fe80::1%eth0", 64, "fe80::/64"},
		{"::1", 64, "::/64"},
		{"not an address", 64, "not an address"},
		{"", 64, ""},
	} {
		if got := Key(c.ip, c.prefix); got != c.want {
			t.Errorf("Key(%q, %d) = %q, want %q", c.ip, c.prefix, got, c.want)
		}
	}
}

func TestAppendKeyAllocs(t *testing.T) {
	var buf [64]byte
	for _, ip := range []string{"203.0.113.8", "::ffff:203.0.113.8", "2001:db8:1:2:3:4:5:6"} {
		if n := testing.AllocsPerRun(100, func() { AppendKey(buf[:0], ip, 64) }); n != 0 {
			t.Errorf("AppendKey(%q) allocates %v times", ip, n)
		}
	}
}
