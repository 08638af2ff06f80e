// Package schema turns one Go struct declaration into everything the gateway
// says about a resource or a plugin config: strict JSON decoding with defaults,
// validation with errors that name the field, and the JSON Schema served in
// the OpenAPI document. Nothing is described twice: a field's json tag, its Go
// type and its `schema` tag are the whole declaration.
//
// Tag grammar (comma-separated, all optional):
//
//	required          the key must be present in the input (and not null)
//	readonly          output only: accepted on input and ignored
//	writeonly         input only: never in answers (secrets)
//	internal          compiled in by the gateway, never part of the API: an
//	                  input naming it is an unknown field (needs omitempty)
//	nullable          null is allowed (pointer fields are nullable by default)
//	notnull           a pointer field that must not be null (pointer only to
//	                  tell "omitted" from a zero value)
//	min=N max=N       numeric bounds
//	minLength=N maxLength=N minItems=N maxItems=N
//	enum=a|b|c        allowed values (strings or integers); for slices: per item
//	format=F          informative (date-time, email, uri …)
//	placeholders      the value (a string, or each value of a string map or
//	                  slice) reaches a Caddy replacer: only the placeholders
//	                  package's allowed placeholders may appear in it
//	secret            the value (a string, or each value of a string map) is
//	                  a secret: Redact replaces it for callers that may not
//	                  see secrets
//
// A `doc:"…"` tag becomes the field's description.
package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/caddy-gateway/gateway/modules/placeholders"
)

// Defaulter is implemented by declarations whose zero value is not their
// default: SetDefaults fills every field with its default before input is
// decoded on top, so omitted fields keep their defaults (PUT is a full
// replacement: what is left out is reset to the default).
type Defaulter interface{ SetDefaults() }

// Validator is implemented by declarations with rules the tags cannot say
// (cross-field rules, regex compilation …). It runs after the tag checks.
type Validator interface{ Validate() error }

// FieldError is a validation failure that names its field.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return e.Field + ": " + e.Msg
}

// Errorf builds a FieldError.
func Errorf(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Prefix puts a parent field name in front of a FieldError's field (for
// nested declarations such as a plugin's config).
func Prefix(prefix string, err error) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		f := prefix
		if fe.Field != "" {
			f = prefix + "." + fe.Field
		}
		return &FieldError{Field: f, Msg: fe.Msg}
	}
	return err
}

// Decode reads JSON from body into dst (a pointer to a declared struct):
// defaults first, then the input, strictly (unknown fields are errors), then
// the tag rules, then dst's own Validate. Read-only fields keep whatever dst
// held before the call.
func Decode(body []byte, dst any) error {
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("schema.Decode: need a pointer to a struct, got %T", dst)
	}
	if d, ok := dst.(Defaulter); ok {
		d.SetDefaults()
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return &FieldError{Msg: "request body must be a JSON object"}
	}
	if body[0] != '{' {
		return &FieldError{Msg: "request body must be a JSON object"}
	}
	var present map[string]json.RawMessage
	if err := json.Unmarshal(body, &present); err != nil {
		return &FieldError{Msg: "malformed JSON: " + jsonErrText(err)}
	}
	info := structInfo(rv.Elem().Type())
	saved := map[int]reflect.Value{}
	for _, f := range info.fields {
		if f.readonly {
			saved[f.index] = reflect.ValueOf(rv.Elem().Field(f.index).Interface())
		}
	}
	if err := checkObject("", present, rv.Elem().Type()); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(dst); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return &FieldError{Msg: "malformed JSON: trailing data after the object"}
	}
	for idx, v := range saved {
		rv.Elem().Field(idx).Set(v)
	}
	return Check(dst)
}

// checkObject walks an input object along its declaration before it is
// decoded, at any depth: unknown fields (keys are exact, as declared),
// required fields and nulls where the declaration has no room for one, each
// named by its full path ("splits[0].weight", "headers.X-Id").
// encoding/json alone names neither the path of an unknown field nor a null
// inside an array or a map, which it silently skips. Values of the wrong
// type are left to the decoder.
func checkObject(path string, obj map[string]json.RawMessage, t reflect.Type) error {
	in := structInfo(t)
	known := make(map[string]bool, len(in.fields))
	for _, f := range in.fields {
		known[f.name] = !f.internal
	}
	for _, k := range sortedKeys(obj) {
		if !known[k] {
			return Errorf(joinPath(path, k), "unknown field")
		}
	}
	for _, f := range in.fields {
		if f.internal || f.readonly {
			continue
		}
		raw, ok := obj[f.name]
		isNull := ok && isJSONNull(raw)
		if f.required && (!ok || (isNull && !f.nullable)) {
			return Errorf(joinPath(path, f.name), "is required")
		}
		if isNull && !f.nullable {
			return Errorf(joinPath(path, f.name), "must not be null")
		}
		if ok && !isNull {
			if err := checkRaw(joinPath(path, f.name), raw, f.typ); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkRaw checks one input value against its Go type (see checkObject).
func checkRaw(path string, raw json.RawMessage, t reflect.Type) error {
	if t == rawMessageType {
		return nil // decoded later by its own declaration (plugin config …)
	}
	null := isJSONNull(raw)
	if t.Kind() == reflect.Pointer {
		if null {
			return nil
		}
		return checkRaw(path, raw, t.Elem())
	}
	if null {
		if t.Kind() == reflect.Interface {
			return nil
		}
		return Errorf(path, "must not be null")
	}
	switch t.Kind() {
	case reflect.Struct:
		var obj map[string]json.RawMessage
		if t == timeType || json.Unmarshal(raw, &obj) != nil {
			return nil
		}
		return checkObject(path, obj, t)
	case reflect.Slice, reflect.Array:
		var items []json.RawMessage
		if t.Elem().Kind() == reflect.Uint8 || json.Unmarshal(raw, &items) != nil {
			return nil
		}
		for i, it := range items {
			if err := checkRaw(fmt.Sprintf("%s[%d]", path, i), it, t.Elem()); err != nil {
				return err
			}
		}
	case reflect.Map:
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return nil
		}
		for _, k := range sortedKeys(obj) {
			if err := checkRaw(joinPath(path, k), obj[k], t.Elem()); err != nil {
				return err
			}
		}
	}
	return nil
}

func isJSONNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// DecodeValue decodes a json.RawMessage (possibly empty or null, meaning "all
// defaults") into dst with the same rules as Decode.
func DecodeValue(raw json.RawMessage, dst any) error {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		t = []byte("{}")
	}
	return Decode(t, dst)
}

// Check runs the tag rules and the Validator of v (a pointer to a struct).
func Check(v any) error {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	info := structInfo(rv.Type())
	for _, f := range info.fields {
		if f.readonly {
			continue
		}
		if err := checkField(f, rv.Field(f.index)); err != nil {
			return err
		}
	}
	if names := RedactedFields(v); len(names) > 0 {
		return Errorf(names[0], "holds the redaction mark %s (a redacted answer or export): send the real value", Redacted)
	}
	if val, ok := v.(Validator); ok {
		return val.Validate()
	}
	return nil
}

func checkField(f *field, v reflect.Value) error {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n := float64(v.Int())
		if f.min != nil && n < *f.min {
			return Errorf(f.name, "must be at least %s", fmtNum(*f.min))
		}
		if f.max != nil && n > *f.max {
			return Errorf(f.name, "must be at most %s", fmtNum(*f.max))
		}
		if len(f.enum) > 0 && !inEnum(f.enum, strconv.FormatInt(v.Int(), 10)) {
			return Errorf(f.name, "must be one of %s", strings.Join(f.enum, ", "))
		}
	case reflect.Float32, reflect.Float64:
		n := v.Float()
		if f.min != nil && n < *f.min {
			return Errorf(f.name, "must be at least %s", fmtNum(*f.min))
		}
		if f.max != nil && n > *f.max {
			return Errorf(f.name, "must be at most %s", fmtNum(*f.max))
		}
	case reflect.String:
		s := v.String()
		n := utf8.RuneCountInString(s)
		if f.minLength != nil && n < *f.minLength {
			if *f.minLength == 1 {
				return Errorf(f.name, "must not be empty")
			}
			return Errorf(f.name, "must be at least %d characters", *f.minLength)
		}
		if f.maxLength != nil && n > *f.maxLength {
			return Errorf(f.name, "must be at most %d characters", *f.maxLength)
		}
		if len(f.enum) > 0 && !inEnum(f.enum, s) {
			return Errorf(f.name, "must be one of %s", strings.Join(f.enum, ", "))
		}
		if f.placeholders {
			if err := placeholders.Check(s); err != nil {
				return Errorf(f.name, "%v", err)
			}
		}
	case reflect.Map:
		if f.placeholders && v.Type().Key().Kind() == reflect.String && v.Type().Elem().Kind() == reflect.String {
			keys := make([]string, 0, v.Len())
			for _, k := range v.MapKeys() {
				keys = append(keys, k.String())
			}
			sort.Strings(keys)
			for _, k := range keys {
				if err := placeholders.Check(v.MapIndex(reflect.ValueOf(k).Convert(v.Type().Key())).String()); err != nil {
					return Errorf(f.name+"."+k, "%v", err)
				}
			}
		}
	case reflect.Slice:
		if f.minItems != nil && v.Len() < *f.minItems {
			return Errorf(f.name, "must have at least %d items", *f.minItems)
		}
		if f.maxItems != nil && v.Len() > *f.maxItems {
			return Errorf(f.name, "must have at most %d items", *f.maxItems)
		}
		if len(f.enum) > 0 {
			for i := 0; i < v.Len(); i++ {
				item := fmt.Sprint(v.Index(i).Interface())
				if !inEnum(f.enum, item) {
					return Errorf(fmt.Sprintf("%s[%d]", f.name, i), "must be one of %s", strings.Join(f.enum, ", "))
				}
			}
		}
		if f.placeholders && v.Type().Elem().Kind() == reflect.String {
			for i := 0; i < v.Len(); i++ {
				if err := placeholders.Check(v.Index(i).String()); err != nil {
					return Errorf(fmt.Sprintf("%s[%d]", f.name, i), "%v", err)
				}
			}
		}
		if f.min != nil || f.max != nil {
			for i := 0; i < v.Len(); i++ {
				sub := *f
				sub.name = fmt.Sprintf("%s[%d]", f.name, i)
				sub.enum = nil
				if err := checkField(&sub, v.Index(i)); err != nil {
					return err
				}
			}
		}
		for i := 0; i < v.Len(); i++ {
			if err := checkNested(fmt.Sprintf("%s[%d]", f.name, i), v.Index(i)); err != nil {
				return err
			}
		}
	case reflect.Struct:
		if err := checkNested(f.name, v); err != nil {
			return err
		}
	}
	return nil
}

func checkNested(name string, v reflect.Value) error {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct || v.Type() == timeType {
		return nil
	}
	if !v.CanAddr() {
		c := reflect.New(v.Type())
		c.Elem().Set(v)
		v = c.Elem()
	}
	return Prefix(name, Check(v.Addr().Interface()))
}

func inEnum(enum []string, s string) bool {
	for _, e := range enum {
		if e == s {
			return true
		}
	}
	return false
}

func fmtNum(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		name := te.Field
		if name == "" {
			return &FieldError{Msg: "request body must be a JSON object"}
		}
		return Errorf(name, "must be %s", jsonKind(te.Type))
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "json: unknown field ") {
		return &FieldError{Field: strings.Trim(strings.TrimPrefix(msg, "json: unknown field "), `"`), Msg: "unknown field"}
	}
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe
	}
	return &FieldError{Msg: "malformed JSON: " + jsonErrText(err)}
}

func jsonErrText(err error) string { return strings.TrimPrefix(err.Error(), "json: ") }

func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a valid value"
}

// ---- reflection cache ----

var timeType = reflect.TypeOf(time.Time{})

type field struct {
	index                int
	name                 string
	typ                  reflect.Type
	required, readonly   bool
	internal             bool
	nullable             bool
	placeholders, secret bool
	min, max             *float64
	minLength, maxLength *int
	minItems, maxItems   *int
	enum                 []string
	format, doc          string
}

type info struct{ fields []*field }

var cache sync.Map // reflect.Type -> *info

func structInfo(t reflect.Type) *info {
	if v, ok := cache.Load(t); ok {
		return v.(*info)
	}
	in := &info{}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		f := &field{index: i, name: name, typ: sf.Type, doc: sf.Tag.Get("doc")}
		f.nullable = sf.Type.Kind() == reflect.Pointer
		for _, opt := range strings.Split(sf.Tag.Get("schema"), ",") {
			k, v, _ := strings.Cut(strings.TrimSpace(opt), "=")
			switch k {
			case "required":
				f.required = true
			case "readonly":
				f.readonly = true
			case "internal":
				f.internal = true
			case "nullable":
				f.nullable = true
			case "notnull":
				f.nullable = false
			case "min":
				f.min = parseF(v)
			case "max":
				f.max = parseF(v)
			case "minLength":
				f.minLength = parseI(v)
			case "maxLength":
				f.maxLength = parseI(v)
			case "minItems":
				f.minItems = parseI(v)
			case "maxItems":
				f.maxItems = parseI(v)
			case "enum":
				f.enum = strings.Split(v, "|")
			case "format":
				f.format = v
			case "placeholders":
				f.placeholders = true
			case "secret":
				f.secret = true
			}
		}
		in.fields = append(in.fields, f)
	}
	cache.Store(t, in)
	return in
}

func parseF(s string) *float64 {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		panic("schema: bad number in tag: " + s)
	}
	return &f
}

func parseI(s string) *int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic("schema: bad integer in tag: " + s)
	}
	return &n
}
