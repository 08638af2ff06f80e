package schema

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

type decl struct {
	ID      int64    `json:"id" schema:"readonly"`
	Name    string   `json:"name" schema:"required,minLength=1"`
	Port    int      `json:"port" schema:"required,min=0,max=65535"`
	Mode    string   `json:"mode" schema:"enum=a|b"`
	On      bool     `json:"on"`
	Tags    []string `json:"tags" schema:"maxItems=2"`
	Note    *string  `json:"note"`
	Secret  string   `json:"secret,omitempty" schema:"writeonly"`
	private int
}

func (d *decl) SetDefaults() { d.Mode, d.On, d.Tags = "a", true, []string{} }

func TestDecodeDefaultsAndRules(t *testing.T) {
	var d decl
	d.ID = 7
	if err := Decode([]byte(`{"name":"x","port":0,"id":99}`), &d); err != nil {
		t.Fatal(err)
	}
	if d.Mode != "a" || !d.On || d.ID != 7 || d.Port != 0 {
		t.Fatalf("defaults/readonly: %+v", d)
	}
	cases := map[string]string{
		`{"port":1}`:                                 "name: is required",
		`{"name":"","port":1}`:                       "name: must not be empty",
		`{"name":"x"}`:                               "port: is required",
		`{"name":"x","port":70000}`:                  "port: must be at most 65535",
		`{"name":"x","port":1,"mode":"c"}`:           "mode: must be one of a, b",
		`{"name":"x","port":"1"}`:                    "port: must be an integer",
		`{"name":"x","port":1,"x":1}`:                "x: unknown field",
		`{"name":"x","port":1,"on":null}`:            "on: must not be null",
		`{"name":"x","port":1,"tags":[1]}`:           "tags[0]: must be a string",
		`{"name":"x","port":1,"tags":["a","b","c"]}`: "tags: must have at most 2 items",
		`{"name":"x"`:                                "malformed JSON",
		`[]`:                                         "JSON object",
		``:                                           "JSON object",
		`{"name":"x","port":1} {}`:                   "malformed JSON",
	}
	wantDecodeErrors[decl](t, cases, false)
	var n decl
	if err := Decode([]byte(`{"name":"x","port":1,"note":null}`), &n); err != nil || n.Note != nil {
		t.Fatalf("nullable: %v %v", err, n.Note)
	}
}

func TestJSONSchema(t *testing.T) {
	in := JSONSchema(decl{}, Input)
	b, _ := json.Marshal(in)
	s := string(b)
	for _, want := range []string{`"required":["name","port"]`, `"default":"a"`, `"writeOnly":true`, `"maximum":65535`, `"enum":["a","b"]`, `"additionalProperties":false`} {
		if !strings.Contains(s, want) {
			t.Errorf("input schema lacks %s: %s", want, s)
		}
	}
	if strings.Contains(s, `"id"`) {
		t.Error("read-only field in the input schema")
	}
	out := JSONSchema(decl{}, Output)
	b, _ = json.Marshal(out)
	if strings.Contains(string(b), "secret") || !strings.Contains(string(b), `"id"`) || !strings.Contains(string(b), `["string","null"]`) {
		t.Errorf("output schema: %s", b)
	}
}

type split struct {
	ServiceID int64 `json:"service_id" schema:"required,min=1"`
	Weight    int32 `json:"weight" schema:"required,min=1"`
}

type nested struct {
	Splits  []split           `json:"splits"`
	Headers map[string]string `json:"headers"`
	Ptrs    []*string         `json:"ptrs"`
	Any     map[string]any    `json:"any"`
}

// Nested input is held to the same rules as the top level, and errors name
// the full path: unknown fields, nested required fields, and nulls inside
// arrays and maps (which encoding/json would silently skip).
func TestDecodeNestedPaths(t *testing.T) {
	cases := map[string]string{
		`{"splits":[{"service_id":1,"weight":1,"x":2}]}`:        "splits[0].x: unknown field",
		`{"splits":[{"service_id":1,"weight":1},{"weight":1}]}`: "splits[1].service_id: is required",
		`{"splits":[null]}`:        "splits[0]: must not be null",
		`{"headers":{"X-A":null}}`: "headers.X-A: must not be null",
		`{"Splits":[]}`:            "Splits: unknown field",
	}
	wantDecodeErrors[nested](t, cases, true)
	var d nested
	if err := Decode([]byte(`{"splits":[{"service_id":1,"weight":2}],"headers":{"a":"*"},"ptrs":[null,"x"],"any":{"k":null}}`), &d); err != nil {
		t.Fatalf("valid nested input: %v", err)
	}
	if len(d.Splits) != 1 || d.Headers["a"] != "*" || d.Ptrs[0] != nil || *d.Ptrs[1] != "x" {
		t.Fatalf("decoded %+v", d)
	}
}

type kinds struct {
	Name    string            `json:"name" schema:"name"`
	Host    string            `json:"host" schema:"host"`
	Path    string            `json:"path" schema:"path"`
	Line    string            `json:"line"`
	Text    *string           `json:"text" schema:"text,maxLength=20"`
	Hosts   []string          `json:"hosts" schema:"host,maxItems=2"`
	Headers map[string]string `json:"headers" schema:"keys=header_name,header_value"`
	Groups  []string          `json:"groups"`
	Small   int32             `json:"small"`
	Big     int64             `json:"big" schema:"min=0,max=3600000"`
	Counts  []int             `json:"counts" schema:"min=1,max=9"`
	Ints    map[string]int64  `json:"ints" schema:"max=5"`
	Raw     json.RawMessage   `json:"raw"`
	URLs    []string          `json:"urls" schema:"url"`
}

// Every string of an input is held to its kind: no control characters
// (text allows tab, CR, LF), a length cap, hosts without spaces, header
// names as tokens, no blank names; slices and maps are capped; integers are
// checked against their type and bounds, each error naming its path.
func TestStringKindsAndBounds(t *testing.T) {
	long := strings.Repeat("a", 4097)
	cases := map[string]string{
		`{"name":"a\r\nb"}`: "name: must not contain control characters (found U+000D)",
		`{"name":"   "}`:    "name: must not be blank",
		`{"name":"` + strings.Repeat("n", 256) + `"}`: "name: must be at most 255 characters",
		`{"line":"a\u0000"}`:                          "line: must not contain control characters (found U+0000)",
		`{"line":"a\tb"}`:                             "line: must not contain control characters (found U+0009)",
		`{"line":"a\u007fb"}`:                         "line: must not contain control characters (found U+007F)",
		`{"line":"` + long + `"}`:                     "line: must be at most 4096 characters",
		`{"host":"a b"}`:                              "host: must not contain spaces",
		`{"host":"a/b"}`:                              `host: must be a host name or IP address ('/' is not allowed)`,
		`{"host":"` + strings.Repeat("h", 254) + `"}`: "host: must be at most 253 characters",
		`{"hosts":["a","b c"]}`:                       "hosts[1]: must not contain spaces",
		`{"hosts":["a","b","c"]}`:                     "hosts: must have at most 2 items",
		`{"path":"/a\nb"}`:                            "path: must not contain control characters (found U+000A)",
		`{"text":"a\u0001"}`:                          "text: must not contain control characters (found U+0001)",
		`{"text":"` + strings.Repeat("t", 21) + `"}`:  "text: must be at most 20 characters",
		`{"headers":{"X-A":"v\r\nX-B: 1"}}`:           "headers.X-A: must not contain control characters (found U+000D)",
		`{"headers":{"X A":"v"}}`:                     `headers.X A: must be a valid header name (' ' is not allowed)`,
		`{"groups":[1]}`:                              "groups[0]: must be a string",
		`{"groups":["ok","a\rb"]}`:                    "groups[1]: must not contain control characters (found U+000D)",
		`{"small":2147483648}`:                        "small: must be an integer between -2147483648 and 2147483647",
		`{"small":1.0}`:                               "small: must be an integer",
		`{"small":"1"}`:                               "small: must be an integer",
		`{"big":9223372036854775807}`:                 "big: must be at most 3600000",
		`{"big":9223372036854775808}`:                 "big: must be an integer between -9223372036854775808 and 9223372036854775807",
		`{"big":1e3}`:                                 "big: must be an integer",
		`{"counts":[1,10]}`:                           "counts[1]: must be at most 9",
		`{"counts":[1,"2"]}`:                          "counts[1]: must be an integer",
		`{"ints":{"a":6}}`:                            "ints.a: must be at most 5",
		`{"name":true}`:                               "name: must be a string",
		`{"hosts":"a"}`:                               "hosts: must be an array",
		`{"headers":[]}`:                              "headers: must be an object",
	}
	wantDecodeErrors[kinds](t, cases, true)
	// Text is taken as written: invalid UTF-8 and unpaired surrogate
	// escapes, which encoding/json would silently turn into U+FFFD, are
	// refused wherever they stand, keys included.
	const notText = ": must be valid UTF-8 text (it holds an invalid byte or an unpaired \\u surrogate escape)"
	wantDecodeErrors[kinds](t, map[string]string{
		"{\"name\":\"a\xffb\"}":                 "name" + notText,
		"{\"headers\":{\"X-\xc0\":\"v\"}}":      "headers.X-\uFFFD" + notText,
		"{\"headers\":{\"X-A\":\"v\xfe\"}}":     "headers.X-A" + notText,
		"{\"hosts\":[\"a\",\"b\xed\xa0\x80\"]}": "hosts[1]" + notText, // a surrogate in UTF-8
		`{"groups":["a","\ud800"]}`:             "groups[1]" + notText,
		`{"groups":["\udc00x"]}`:                "groups[0]" + notText,
		`{"groups":["\ud800\u0041"]}`:           "groups[0]" + notText,
		`{"raw":{"a":[{"b":"\ud800"}]}}`:        "raw.a[0].b" + notText,
		`{"name":"x","line":"\udbff"}`:          "line" + notText,
	}, true)
	// Hosts and URLs a connection is made to.
	wantDecodeErrors[kinds](t, map[string]string{
		`{"urls":["ftp://a.example"]}`:          "urls[0]: must be an absolute http or https URL (scheme http or https)",
		`{"urls":["http://:8080/x"]}`:           "urls[0]: must have a host (http://host/…)",
		`{"urls":["https://a.example:99999/"]}`: "urls[0]: has port 99999: a port is 1 to 65535",
		`{"urls":["https://a.example:0/"]}`:     "urls[0]: has port 0: a port is 1 to 65535",
		`{"urls":["https://a.example/#x"]}`:     "urls[0]: must not have a fragment (#…)",
		`{"urls":["http:a.example"]}`:           "urls[0]: must be an absolute http or https URL (http://host/…)",
		`{"urls":["http://127.1/"]}`:            `urls[0]: host "127.1" must be an IPv4 address in standard form`,
		`{"urls":["http://2130706433/"]}`:       `urls[0]: host "2130706433" must be an IPv4 address`,
		`{"urls":["http://0x7f000001/"]}`:       `urls[0]: host "0x7f000001" must be an IPv4 address`,
		`{"urls":["http://0177.0.0.1/"]}`:       `urls[0]: host "0177.0.0.1" must be an IPv4 address`,
		`{"urls":["http://a..example/"]}`:       `urls[0]: host "a..example" must be an IP address or a DNS name (labels of 1 to 63 characters)`,
		`{"urls":["http://a$b.example/"]}`:      `urls[0]: host "a$b.example" must be an IP address or a DNS name ('$' is not allowed)`,
	}, false)
	many := make([]string, DefaultMaxItems+1)
	for i := range many {
		many[i] = `"g"`
	}
	var k kinds
	if err := Decode([]byte(`{"groups":[`+strings.Join(many, ",")+`]}`), &k); err == nil || err.Error() != "groups: must have at most 1000 items" {
		t.Errorf("default item cap: %v", err)
	}
	ok := `{"name":" a ","host":"*.example.com","path":"/a b","line":"ünïcode","text":"a\r\n\tb","hosts":["[::1]","fe80::1%eth0"],` +
		`"headers":{"X-A":"a b é"},"groups":["g","\ud83d\ude00 \ufffd \uFFFD � \\ud800"],"small":-2147483648,"big":3600000,"counts":[9],"ints":{"a":5},"raw":{"x":"\u0000"},` +
		`"urls":["","http://a.example","HTTPS://user:pw@A.example:8443/p?q","http://[::1]:1/","https://10.0.0.1:65535","http://my_svc.internal./","https://bücher.example/","http://0x.example.com"]}`
	if err := Decode([]byte(ok), &k); err != nil {
		t.Fatalf("valid input refused: %v", err)
	}
	// Check (Provision of plugin modules) applies the same rules to values
	// that did not come through Decode, including invalid UTF-8.
	bad := kinds{Line: "a\xffb"}
	if err := Check(&bad); err == nil || err.Error() != "line: must be valid UTF-8" {
		t.Errorf("invalid UTF-8: %v", err)
	}
	bad = kinds{Headers: map[string]string{"X": "a\nb"}}
	if err := Check(&bad); err == nil || err.Error() != "headers.X: must not contain control characters (found U+000A)" {
		t.Errorf("Check header value: %v", err)
	}
}

func TestJSONSchemaKinds(t *testing.T) {
	b, _ := json.Marshal(JSONSchema(kinds{}, Input))
	s := string(b)
	for _, want := range []string{
		`"name":{"maxLength":255,"pattern":"^[^\\x00-\\x1F\\x7F]*$","type":"string"}`,
		`"hosts":{"items":{"maxLength":253,"pattern":"^[A-Za-z0-9._*:%\\[\\]-]*$","type":"string"},"maxItems":2,"type":"array"}`,
		`"small":{"format":"int32","maximum":2147483647,"minimum":-2147483648,"type":"integer"}`,
		`"maxProperties":1000`,
		`"text":{"maxLength":20,"pattern":"^[^\\x00-\\x08\\x0B\\x0C\\x0E-\\x1F\\x7F]*$","type":["string","null"]}`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("input schema lacks %s:\n%s", want, s)
		}
	}
	for _, k := range []strKind{kindLine, kindHost, kindHeaderName, kindText} {
		if _, err := regexp.Compile(k.pattern()); err != nil {
			t.Errorf("pattern of %q: %v", k, err)
		}
	}
}

// wantDecodeErrors decodes each input (key) into a fresh T and checks the
// error against the value: equal to it (exact) or containing it.
func wantDecodeErrors[T any](t *testing.T, cases map[string]string, exact bool) {
	t.Helper()
	for in, want := range cases {
		var v T
		err := Decode([]byte(in), &v)
		if err == nil || (exact && err.Error() != want) || (!exact && !strings.Contains(err.Error(), want)) {
			t.Errorf("%.80s: got %v, want %q", in, err, want)
		}
	}
}

// shared is an unexported embedded struct: not part of the declaration.
type shared struct {
	Limit int `json:"limit"`
}

type embedding struct {
	Name string `json:"name" schema:"required"`
	shared
	Shared
	private shared
}

// Shared is exported: its fields are the declaration's own; the unexported
// shared's are not (nor a named field's).
type Shared struct {
	Hidden bool `json:"hidden"`
	Inner  int  `json:"inner" schema:"internal"`
}

func TestEmbeddedDeclaration(t *testing.T) {
	idx := FieldIndex(reflect.TypeFor[embedding]())
	if len(idx) != 3 || !reflect.DeepEqual(idx["hidden"], []int{2, 0}) || !reflect.DeepEqual(idx["inner"], []int{2, 1}) || idx["name"] == nil {
		t.Fatalf("FieldIndex = %v", idx)
	}
	var e embedding
	err := Decode([]byte(`{"name":"x","hidden":true,"limit":3}`), &e)
	if err == nil || !strings.Contains(err.Error(), "limit: unknown field") {
		t.Fatalf("a field of an unexported embedded struct: %v", err)
	}
	if err := Decode([]byte(`{"name":"x","hidden":true,"inner":4}`), &e); err == nil || !strings.Contains(err.Error(), "inner: unknown field") {
		t.Fatalf("an internal embedded field from the API: %v", err)
	}
	if err := Decode([]byte(`{"name":"x","hidden":true}`), &e); err != nil || !e.Hidden {
		t.Fatalf("decoded %+v, %v", e, err)
	}
	s := JSONSchema(&e, Input)["properties"].(map[string]any)
	if _, ok := s["hidden"]; !ok {
		t.Fatalf("schema properties %v", s)
	}
}

type withPart struct {
	Part
	Name string `json:"name"`
}

// Part is an embedded declaration with rules of each kind.
type Part struct {
	Limit int    `json:"limit" schema:"min=1,max=10"`
	Stamp int64  `json:"stamp" schema:"readonly"`
	Token string `json:"token" schema:"secret"`
}

func TestEmbeddedRules(t *testing.T) {
	w := withPart{Part: Part{Stamp: 5}}
	if err := Decode([]byte(`{"limit":11}`), &w); err == nil || !strings.Contains(err.Error(), "limit: must be at most 10") {
		t.Fatalf("bound of an embedded field: %v", err)
	}
	w = withPart{Part: Part{Stamp: 5}}
	if err := Decode([]byte(`{"limit":2,"stamp":9,"token":"t"}`), &w); err != nil || w.Limit != 2 || w.Stamp != 5 {
		t.Fatalf("decoded %+v (stamp is read-only), %v", w, err)
	}
	if names := Redact(&w); len(names) != 1 || names[0] != "token" || w.Token != Redacted {
		t.Fatalf("redacted %v: %+v", names, w)
	}
}

func TestClampMax(t *testing.T) {
	type cfg struct {
		A int64    `json:"a" schema:"min=1,max=10"`
		B *int     `json:"b" schema:"max=5"`
		C float64  `json:"c" schema:"max=1.5"`
		D int      `json:"d" schema:"min=3"`
		E int      `json:"e" schema:"readonly,max=1"`
		F []string `json:"f" schema:"maxItems=1"`
	}
	b := 9
	v := cfg{A: 11, B: &b, C: 1, D: 0, E: 7, F: []string{"x", "y"}}
	names := ClampMax(&v)
	if strings.Join(names, ",") != "a,b" || v.A != 10 || *v.B != 5 || v.C != 1 || v.D != 0 || v.E != 7 || len(v.F) != 2 {
		t.Fatalf("%v %+v %d", names, v, *v.B)
	}
	if names := ClampMax(&v); names != nil {
		t.Fatalf("second pass: %v", names)
	}
}

// The path of an invalid string is found in one pass: descending level by
// level skipped the whole enclosing value at every level, so a body nested
// thousands deep with the bad byte at its bottom cost size × depth (a
// 64 KiB public sign-in body 0.6 s of CPU, 2 MiB 5 s, 20 MiB minutes).
func TestInvalidTextPathOfADeepBody(t *testing.T) {
	const depth = 9000 // encoding/json refuses more than 10000
	pad := strings.Repeat("a", 2<<20)
	body := []byte(`{"raw":` + strings.Repeat("[", depth) + `"` + pad + "\xff\"" + strings.Repeat("]", depth) + `}`)
	var k kinds
	start := time.Now()
	err := Decode(body, &k)
	if el := time.Since(start); el > time.Second {
		t.Errorf("took %v", el)
	}
	want := "raw" + strings.Repeat("[0]", depth) + ": must be valid UTF-8 text"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got %.200v", err)
	}
	// Keys and later members are named as before.
	wantDecodeErrors[kinds](t, map[string]string{
		"{\"raw\":{\"a\":[1,{\"b\":\"x\"},{\"c\\n\":[\"\xff\"]}]}}":        "raw.a[2].c\n[0]: must be valid",
		"{\"raw\":{\"a\":[1,{\"b\":\"x\"},{\"c\xff\":[\"\\ud800\"]}]}}":    "raw.a[2].c\uFFFD: must be valid",
		"{\"raw\":[[],{},\"\",[\"x\",\"y\\\"\\\\\",{\"k\":\"\\udc00\"}]]}": "raw[3][2].k: must be valid",
		"{\"groups\":[\"a\"],\"name\":\"\xc3\"}":                           "name: must be valid",
	}, false)
}

type inner struct {
	Name  string `json:"name"`
	Stamp int    `json:"stamp,omitempty" schema:"internal"`
}

type outer struct {
	In      *inner            `json:"in"`
	Ins     []inner           `json:"ins"`
	Headers map[string]string `json:"headers"`
	Nested  map[string]inner  `json:"nested"`
}

// A key given twice is decoded twice by encoding/json, which merges
// objects given twice (a struct, a map, a slice's items): every occurrence
// is held to the rules, not only the last one, or a nested internal field,
// a null map value, a key in another case or a wrong type got past the
// walk (named without its path, or not at all).
func TestDuplicateKeys(t *testing.T) {
	wantDecodeErrors[outer](t, map[string]string{
		`{"in":{"stamp":1},"in":{"name":"x"}}`:         "in.stamp: unknown field",
		`{"ins":[{"stamp":1}],"ins":[{"name":"x"}]}`:   "ins[0].stamp: unknown field",
		`{"ins":[{"NAME":"x"}],"ins":[{}]}`:            "ins[0].NAME: unknown field",
		`{"ins":[{"name":1}],"ins":[]}`:                "ins[0].name: must be a string",
		`{"headers":{"a":null},"headers":{}}`:          "headers.a: must not be null",
		`{"headers":{"a":1,"a":"x"}}`:                  "headers.a: must be a string",
		`{"nested":{"k":{"stamp":1},"k":{}}}`:          "nested.k.stamp: unknown field",
		`{"in":{"name":"x"},"in":{"name":"y","in":1}}`: "in.in: unknown field",
		`{"ins":[null],"ins":[]}`:                      "ins[0]: must not be null",
		`{"headers":{"a":"x"},"headers":null}`:         "headers: must not be null",
		`{"headers":null,"headers":{"a":"x"}}`:         "headers: must not be null",
	}, true)
	// As encoding/json: a value given twice is the last one, objects
	// given twice are merged.
	var o outer
	if err := Decode([]byte(`{"in":{"name":"a"},"in":{"name":"b"},"headers":{"a":"1"},"headers":{"b":"2","b":"3"}}`), &o); err != nil {
		t.Fatal(err)
	}
	if o.In.Name != "b" || len(o.Headers) != 2 || o.Headers["a"] != "1" || o.Headers["b"] != "3" {
		t.Fatalf("decoded %+v", o)
	}
}

type stamped struct {
	ID      int64      `json:"id" schema:"readonly"`
	Created time.Time  `json:"created" schema:"readonly"`
	Expires *time.Time `json:"expires"`
	When    time.Time  `json:"when"`
}

// A date-time that does not parse is named like any wrong value (it was
// "malformed JSON: parsing time …" from time.Time's UnmarshalJSON); a
// read-only value, ignored, must still be of its type, which the decoder
// checks: its errors name it too.
func TestDateTimes(t *testing.T) {
	const bad = "must be a date-time string (RFC 3339: 2006-01-02T15:04:05Z)"
	wantDecodeErrors[stamped](t, map[string]string{
		`{"when":"yesterday"}`:            "when: " + bad,
		`{"when":""}`:                     "when: " + bad,
		`{"when":"2020-01-01"}`:           "when: " + bad,
		`{"when":"2020-13-01T00:00:00Z"}`: "when: " + bad,
		`{"expires":"x"}`:                 "expires: " + bad,
		`{"when":5}`:                      "when: " + bad,
		`{"created":"yesterday"}`:         "created: " + bad,
		`{"created":5}`:                   "created: " + bad,
		`{"id":"1"}`:                      "id: must be an integer",
		`{"id":1.5}`:                      "id: must be an integer",
	}, true)
	s := stamped{ID: 3}
	if err := Decode([]byte(`{"id":9,"created":"2001-02-03T04:05:06Z","expires":"2030-01-01T00:00:00+02:00","when":"2020-01-01T00:00:00.5Z"}`), &s); err != nil {
		t.Fatal(err)
	}
	if s.ID != 3 || !s.Created.IsZero() || s.Expires.Year() != 2030 || s.When.Nanosecond() != 5e8 {
		t.Fatalf("decoded %+v", s)
	}
	if err := Decode([]byte(`{"id":null,"created":null,"expires":null}`), &s); err != nil {
		t.Fatal(err)
	}
}

type held struct {
	Issuer *string           `json:"issuer" schema:"readonly"`
	Labels map[string]string `json:"labels" schema:"readonly"`
	Name   string            `json:"name"`
}

// Read-only fields keep what dst held, also behind a pointer or in a map:
// the decoder writes into a non-nil pointer's target and into an existing
// map, which the saved copy of the field shares.
func TestReadOnlyKeptBehindPointers(t *testing.T) {
	iss := "CA"
	h := held{Issuer: &iss, Labels: map[string]string{"a": "1"}}
	if err := Decode([]byte(`{"issuer":"evil","labels":{"a":"2","b":"3"},"name":"x"}`), &h); err != nil {
		t.Fatal(err)
	}
	if iss != "CA" || h.Issuer != &iss || len(h.Labels) != 1 || h.Labels["a"] != "1" || h.Name != "x" {
		t.Fatalf("read-only values changed: issuer %q, labels %v", iss, h.Labels)
	}
}

// Only JSON's own whitespace (space, tab, CR, LF) may surround the body:
// bytes.TrimSpace also took U+0085 and U+00A0, which encoding/json refuses.
func TestBodyWhitespace(t *testing.T) {
	wantDecodeErrors[decl](t, map[string]string{
		"\u00a0{\"name\":\"x\",\"port\":1}": "request body must be a JSON object",
		"{\"name\":\"x\",\"port\":1}\u00a0": "malformed JSON: invalid character",
		"{\"name\":\"x\",\"port\":1}\u0085": "malformed JSON: invalid character",
		"\v{\"name\":\"x\",\"port\":1}":     "request body must be a JSON object",
		"{\"name\":\"x\",\"port\":1}\f":     "malformed JSON: invalid character",
		"\ufeff{\"name\":\"x\",\"port\":1}": "request body must be a JSON object without a byte order mark",
	}, false)
	var d decl
	if err := Decode([]byte(" \t\r\n{\"name\":\"x\",\"port\":1}\r\n \t"), &d); err != nil {
		t.Fatal(err)
	}
}
