package pathexpr

import "testing"

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		ok      bool
	}{
		{"/", true},
		{"/api/v1", true},
		{"~/users/[0-9]+$", true},
		{"~", true}, // the empty expression matches every path
		{"api", false},
		{"", false},
		// Wrapped as ^(?:a)(b) this compiles; the router refuses it, so
		// the API must too.
		{"~a)(b", false},
		{"~(", false},
		{"~[", false},
	} {
		err := Validate(tc.pattern)
		if (err == nil) != tc.ok {
			t.Errorf("Validate(%q) = %v, want ok=%v", tc.pattern, err, tc.ok)
		}
	}
}

func TestCompilePrefix(t *testing.T) {
	re, prefix, err := Compile(`/users/[0-9]+`)
	if err != nil {
		t.Fatal(err)
	}
	if prefix != "/users/" {
		t.Errorf("prefix = %q, want /users/", prefix)
	}
	if !re.MatchString("/users/12/x") || re.MatchString("/x/users/12") {
		t.Errorf("%s is not anchored at the start only", re)
	}
}
