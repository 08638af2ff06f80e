package schema

import (
	"encoding/json"
	"strings"
	"testing"
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
		`{"name":"x","port":1,"tags":[1]}`:           "tags: must be a string",
		`{"name":"x","port":1,"tags":["a","b","c"]}`: "tags: must have at most 2 items",
		`{"name":"x"`:                                "malformed JSON",
		`[]`:                                         "JSON object",
		``:                                           "JSON object",
		`{"name":"x","port":1} {}`:                   "malformed JSON",
	}
	for in, want := range cases {
		var d decl
		err := Decode([]byte(in), &d)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", in, err, want)
		}
	}
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
	for in, want := range cases {
		var d nested
		err := Decode([]byte(in), &d)
		if err == nil || err.Error() != want {
			t.Errorf("%s: got %v, want %q", in, err, want)
		}
	}
	var d nested
	if err := Decode([]byte(`{"splits":[{"service_id":1,"weight":2}],"headers":{"a":"*"},"ptrs":[null,"x"],"any":{"k":null}}`), &d); err != nil {
		t.Fatalf("valid nested input: %v", err)
	}
	if len(d.Splits) != 1 || d.Headers["a"] != "*" || d.Ptrs[0] != nil || *d.Ptrs[1] != "x" {
		t.Fatalf("decoded %+v", d)
	}
}
