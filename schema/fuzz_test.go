package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

type fuzzItem struct {
	Name  string         `json:"name"`
	N     int8           `json:"n"`
	Opt   *uint16        `json:"opt"`
	Inner *fuzzItem      `json:"inner"`
	Tags  []string       `json:"tags" schema:"maxItems=3"`
	Any   any            `json:"any"`
	Hid   int            `json:"hid,omitempty" schema:"internal"`
	Ints  map[string]int `json:"ints"`
}

type fuzzDecl struct {
	ID    int64               `json:"id" schema:"readonly"`
	Name  string              `json:"name" schema:"required,text"`
	Big   int64               `json:"big"`
	U     uint32              `json:"u"`
	F     float64             `json:"f"`
	On    bool                `json:"on"`
	Note  *string             `json:"note"`
	Tags  []string            `json:"tags"`
	Items []fuzzItem          `json:"items"`
	Map   map[string]fuzzItem `json:"map"`
	Sub   *fuzzItem           `json:"sub"`
	When  *time.Time          `json:"when"`
	Raw   json.RawMessage     `json:"raw" schema:"nullable"`
	Hid   string              `json:"hid,omitempty" schema:"internal"`
}

// FuzzDecode holds Decode to encoding/json where they must agree: what
// Decode accepts, a strict encoding/json decoder (unknown fields refused,
// nothing after the value) accepts too and decodes to the same value;
// every refusal is a FieldError (a 400), "malformed JSON" only for a body
// that is not JSON; and it never panics. Decode may refuse more (keys in
// another case, nulls, its string kinds and bounds).
// go test ./schema -run '^$' -fuzz FuzzDecode -fuzztime 2m
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"name":"x"}`,
		`{"name":"x","id":5,"big":-9223372036854775808,"u":4294967295,"f":-0,"on":true,"note":null}`,
		`{"name":"x","items":[{"name":"a","n":-128,"opt":65535,"inner":{"tags":["t"]},"any":{"k":[1,"2",null]}}]}`,
		`{"name":"x","map":{"k":{"ints":{"a":1}},"k":{"n":1}},"sub":{"inner":null}}`,
		`{"name":"x","when":"2020-01-01T00:00:00Z","raw":{"a":"\ud800"}}`,
		`{"name":"x","sub":{"Name":"y"}}`,
		`{"name":"x","items":[{"hid":1}],"items":[{}]}`,
		`{"name":"x","f":1e400,"big":1e2,"u":-1}`,
		`{"n\u0061me":"\u00e9\ud83d\ude00","tags":["a","a"],"tags":[]}`,
		" {\"name\":\"x\"}\n",
		`{"name":"x"} {}`,
		`{"name":"x","when":"yesterday"}`,
		`{"name":"x","id":"1"}`,
		`[{"name":"x"}]`,
		"\u00a0{\"name\":\"x\"}\u0085",
		`{"name":"x","items":[[[[[]]]]]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var got fuzzDecl
		err := Decode(body, &got)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("%q: %T %v is not a FieldError (a 500)", body, err, err)
			}
			if json.Valid(body) && strings.HasPrefix(err.Error(), "malformed JSON") {
				t.Fatalf("%q is JSON: %v", body, err)
			}
			return
		}
		var want fuzzDecl
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		dec.UseNumber()
		if err := dec.Decode(&want); err != nil {
			t.Fatalf("%q: Decode accepted what encoding/json refuses: %v", body, err)
		}
		if _, err := dec.Token(); err != io.EOF {
			t.Fatalf("%q: Decode accepted data after the object", body)
		}
		want.ID = 0 // read-only: ignored
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: Decode gave %+v, encoding/json %+v", body, got, want)
		}
	})
}
