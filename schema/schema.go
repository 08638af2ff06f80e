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
//	enum=@name        the values registered as name with RegisterEnum (lists
//	                  known at run time, such as the plugin types)
//	extension=a|b     enum values that extend the contract's (its JSON Schema
//	                  lists them as x-extension-values)
//	format=F          informative (date-time, email, uri …)
//	placeholders      the value (a string, or each value of a string map or
//	                  slice) reaches a Caddy replacer: only the placeholders
//	                  package's allowed placeholders may appear in it
//	secret            the value (a string, each value of a string map, or an
//	                  opaque JSON value) is a secret: Redact replaces it for
//	                  callers that may not see secrets
//	KIND              what a string holds (for slices: each item; for maps:
//	                  each value), one of the kinds below
//	keys=KIND         the kind of a map's keys
//
// Every string anywhere in an input (fields, items, map keys and values) is
// held to its kind's rules, so a field cannot forget them: valid UTF-8, no
// control characters and a length cap. Kinds:
//
//	(none)            one line: no control character (U+0000..U+001F,
//	                  U+007F), at most 4096 characters
//	name              a line that is not blank (whitespace only), at most 255
//	host              a host name, IP address or host pattern: ASCII letters,
//	                  digits and . - _ * : % [ ] only, at most 253
//	path              a URL path or path pattern, at most 4096
//	header_name       an HTTP header name (an RFC 9110 token), at most 256
//	header_value      an HTTP header value (a line), at most 8192
//	text              multi-line text (tab, CR and LF allowed, other control
//	                  characters not), at most 65536 (PEM, bodies …)
//	url               empty, or an absolute http or https URL a connection
//	                  can be made to (HTTPURL's rules), at most 4096; its
//	                  JSON Schema format is uri
//
// maxLength overrides the kind's cap. Slices and maps hold at most 1000
// items unless maxItems says otherwise. Integers outside their Go type's
// range are refused naming the field; declarations give every integer an
// explicit max (a test in each declaring package walks them).
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
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/caddy-gateway/gateway/internal/placeholders"
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
	body = trimJSONSpace(body)
	if len(body) == 0 {
		return &FieldError{Msg: "request body must be a JSON object"}
	}
	if bytes.HasPrefix(body, []byte("\ufeff")) {
		return &FieldError{Msg: "request body must be a JSON object without a byte order mark (U+FEFF)"}
	}
	if body[0] != '{' {
		return &FieldError{Msg: "request body must be a JSON object"}
	}
	if !json.Valid(body) {
		var v json.RawMessage
		err := json.Unmarshal(body, &v)
		if err == nil {
			err = errors.New("invalid JSON")
		}
		return &FieldError{Msg: "malformed JSON: " + jsonErrText(err)}
	}
	if path, bad := invalidText(body); bad {
		return Errorf(path, "must be valid UTF-8 text (it holds an invalid byte or an unpaired \\u surrogate escape)")
	}
	info := structInfo(rv.Elem().Type())
	if err := checkObject("", body, rv.Elem().Type()); err != nil {
		return err
	}
	// Read-only fields are set aside and zeroed for the decoder, which
	// would write into a non-nil pointer's target or an existing map (the
	// very ones a shallow copy of the field holds), and put back after it.
	saved := map[*field]reflect.Value{}
	for _, f := range info.fields {
		if f.readonly {
			fv := rv.Elem().FieldByIndex(f.index)
			c := reflect.New(fv.Type()).Elem()
			c.Set(fv)
			saved[f] = c
			fv.SetZero()
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	err := dec.Decode(dst)
	for f, v := range saved {
		rv.Elem().FieldByIndex(f.index).Set(v)
	}
	if err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return &FieldError{Msg: "malformed JSON: trailing data after the object"}
	}
	return Check(dst)
}

// checkObject walks an input object (raw, valid JSON) along its
// declaration before it is decoded, at any depth: unknown fields (keys are
// exact, as declared), required fields, nulls where the declaration has no
// room for one, and the item counts of arrays and maps, each named by its
// full path ("splits[0].weight", "headers.X-Id"). encoding/json alone
// names neither the path of an unknown field nor a null inside an array or
// a map, which it silently skips; and it would decode every item of an
// array before Check could refuse their count. Values of the wrong type are
// left to the decoder.
func checkObject(path string, raw []byte, t reflect.Type) error {
	in := structInfo(t)
	// Only declared keys are kept (a key given twice: its last value), so
	// the walk holds at most a value per field. An earlier value of a key
	// given twice is checked when the later one replaces it: the decoder
	// decodes both, and merges objects given twice (a struct, a map, the
	// items of a slice), so the last value is not all that is decoded.
	obj := map[string][]byte{}
	err := eachMember(raw, func(k string, v []byte) error {
		f := in.byName[k]
		if f == nil || f.internal {
			return Errorf(joinPath(path, k), "unknown field")
		}
		if prev, ok := obj[k]; ok {
			if err := checkField(path, f, prev, true); err != nil {
				return err
			}
		}
		obj[k] = v
		return nil
	})
	if err != nil {
		return err
	}
	for _, f := range in.fields {
		if f.internal {
			continue
		}
		raw, ok := obj[f.name]
		if err := checkField(path, f, raw, ok); err != nil {
			return err
		}
	}
	return nil
}

// checkField checks the value raw of the field f of the object at path
// (ok: the key is present).
func checkField(path string, f *field, raw []byte, ok bool) error {
	isNull := ok && isJSONNull(raw)
	if !f.readonly {
		if f.required && (!ok || (isNull && !f.nullable)) {
			return Errorf(joinPath(path, f.name), "is required")
		}
		if isNull && !f.nullable {
			return Errorf(joinPath(path, f.name), "must not be null")
		}
	}
	// A read-only value is ignored but decoded all the same: a value the
	// decoder would refuse is named here too.
	if ok && !isNull {
		max := DefaultMaxItems
		if f.maxItems != nil {
			max = *f.maxItems
		}
		return checkRaw(joinPath(path, f.name), raw, f.typ, max)
	}
	return nil
}

// checkRaw checks one input value against its Go type (see checkObject):
// its JSON kind, the count of an array's or a map's items (at most
// maxItems; those of nested arrays and maps DefaultMaxItems, as Check
// counts them), and for integers their syntax and the Go type's range, so
// that a wrong type is named by its full path ("groups[0]: must be a
// string"), which encoding/json cannot do inside arrays and maps.
func checkRaw(path string, raw []byte, t reflect.Type, maxItems int) error {
	if t == rawMessageType {
		return nil // decoded later by its own declaration (plugin config …)
	}
	raw = trimJSONSpace(raw)
	null := isJSONNull(raw)
	if t.Kind() == reflect.Pointer {
		if null {
			return nil
		}
		return checkRaw(path, raw, t.Elem(), maxItems)
	}
	if null {
		if t.Kind() == reflect.Interface {
			return nil
		}
		return Errorf(path, "must not be null")
	}
	if len(raw) == 0 {
		return nil // the decoder reports malformed JSON
	}
	c := raw[0]
	switch t.Kind() {
	case reflect.Bool:
		if c != 't' && c != 'f' {
			return Errorf(path, "must be a boolean")
		}
	case reflect.String:
		if c != '"' {
			return Errorf(path, "must be a string")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return checkRawInt(path, raw, t)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return checkRawInt(path, raw, t)
	case reflect.Float32, reflect.Float64:
		if c != '-' && (c < '0' || c > '9') {
			return Errorf(path, "must be a number")
		}
	case reflect.Struct:
		if t == timeType {
			// The decoder's own error (time.Time's UnmarshalJSON) names
			// no field and is not about JSON.
			var tm time.Time
			if c != '"' || tm.UnmarshalJSON(raw) != nil {
				return Errorf(path, "must be a date-time string (RFC 3339: 2006-01-02T15:04:05Z)")
			}
			return nil
		}
		if c != '{' {
			return Errorf(path, "must be an object")
		}
		return checkObject(path, raw, t)
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil // []byte: base64 text, the decoder checks it
		}
		if c != '[' {
			return Errorf(path, "must be an array")
		}
		if n := countItems(raw, maxItems); n > maxItems {
			return Errorf(path, "must have at most %d items", maxItems)
		}
		return eachItem(raw, func(i int, it []byte) error {
			return checkRaw(fmt.Sprintf("%s[%d]", path, i), it, t.Elem(), DefaultMaxItems)
		})
	case reflect.Map:
		if c != '{' {
			return Errorf(path, "must be an object")
		}
		if n := countItems(raw, maxItems); n > maxItems {
			return Errorf(path, "must have at most %d items", maxItems)
		}
		// A key given twice: the decoder decodes both values (see
		// checkObject), the earlier one is checked as it is replaced.
		obj := map[string][]byte{}
		err := eachMember(raw, func(k string, v []byte) error {
			if prev, ok := obj[k]; ok {
				if err := checkRaw(joinPath(path, k), prev, t.Elem(), DefaultMaxItems); err != nil {
					return err
				}
			}
			obj[k] = v
			return nil
		})
		if err != nil {
			return err
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if err := checkRaw(joinPath(path, k), obj[k], t.Elem(), DefaultMaxItems); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkRawInt checks an integer literal: digits only (no fraction, no
// exponent, no quotes) within the range of the Go type.
func checkRawInt(path string, raw json.RawMessage, t reflect.Type) error {
	s := string(raw)
	bits := t.Bits()
	var err error
	if t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64 {
		_, err = strconv.ParseUint(s, 10, bits)
	} else {
		_, err = strconv.ParseInt(s, 10, bits)
	}
	if err == nil {
		return nil
	}
	var ne *strconv.NumError
	if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
		lo, hi := intRange(t)
		return Errorf(path, "must be an integer between %s and %s", lo, hi)
	}
	return Errorf(path, "must be an integer")
}

// intRange is the range of an integer type, as decimal strings.
func intRange(t reflect.Type) (string, string) {
	bits := t.Bits()
	if t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64 {
		return "0", strconv.FormatUint(1<<bits-1, 10)
	}
	return strconv.FormatInt(-1<<(bits-1), 10), strconv.FormatInt(1<<(bits-1)-1, 10)
}

// trimJSONSpace trims JSON's whitespace (space, tab, CR, LF) from b; not
// bytes.TrimSpace's, which also takes \v, \f, U+0085 and U+00A0 that
// encoding/json refuses.
func trimJSONSpace(b []byte) []byte {
	i := skipSpace(b, 0)
	j := len(b)
	for j > i && (b[j-1] == ' ' || b[j-1] == '\t' || b[j-1] == '\n' || b[j-1] == '\r') {
		j--
	}
	return b[i:j]
}

func isJSONNull(raw json.RawMessage) bool { return string(trimJSONSpace(raw)) == "null" }

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// DecodeValue decodes a json.RawMessage (possibly empty or null, meaning "all
// defaults") into dst with the same rules as Decode.
func DecodeValue(raw json.RawMessage, dst any) error {
	t := trimJSONSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		t = []byte("{}")
	}
	return Decode(t, dst)
}

// Check runs the tag rules and the Validator of v (a pointer to a struct).
// Internal fields are the gateway's own (compiled in, never input) and are
// not checked here.
func Check(v any) error {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	// A redacted answer sent back says so first: its mark would also
	// break the field's own rules (a URL's user information).
	if names := RedactedFields(v); len(names) > 0 {
		return Errorf(names[0], "holds the redaction mark %s (a redacted answer or export): send the real value", Redacted)
	}
	info := structInfo(rv.Type())
	for _, f := range info.fields {
		if f.readonly || f.internal {
			continue
		}
		if err := checkValue(f, f.name, rv.FieldByIndex(f.index), 0); err != nil {
			return err
		}
	}
	if val, ok := v.(Validator); ok {
		return val.Validate()
	}
	return nil
}

// DefaultMaxItems caps slices and maps without a maxItems tag.
const DefaultMaxItems = 1000

// checkValue checks v, the value of field f (depth 0) or one of its items
// or map values (depth > 0), named name.
func checkValue(f *field, name string, v reflect.Value, depth int) error {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return checkNumber(f, name, float64(v.Int()), strconv.FormatInt(v.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return checkNumber(f, name, float64(v.Uint()), strconv.FormatUint(v.Uint(), 10))
	case reflect.Float32, reflect.Float64:
		return checkNumber(f, name, v.Float(), "")
	case reflect.String:
		return checkString(f.str, f.values(), name, v.String())
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return nil // bytes (json.RawMessage …): not text
		}
		if err := checkCount(f, name, v.Len(), depth); err != nil {
			return err
		}
		for i := 0; i < v.Len(); i++ {
			if err := checkValue(f, fmt.Sprintf("%s[%d]", name, i), v.Index(i), depth+1); err != nil {
				return err
			}
		}
	case reflect.Map:
		if err := checkCount(f, name, v.Len(), depth); err != nil {
			return err
		}
		keys := make([]string, 0, v.Len())
		for _, k := range v.MapKeys() {
			if k.Kind() == reflect.String {
				keys = append(keys, k.String())
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			if err := checkString(f.keys, nil, name, k); err != nil {
				var fe *FieldError
				if errors.As(err, &fe) {
					return Errorf(joinPath(name, k), "%s", fe.Msg)
				}
				return err
			}
			if err := checkValue(f, joinPath(name, k), v.MapIndex(reflect.ValueOf(k).Convert(v.Type().Key())), depth+1); err != nil {
				return err
			}
		}
	case reflect.Struct:
		return checkNested(name, v)
	}
	return nil
}

func checkNumber(f *field, name string, n float64, asText string) error {
	if f.min != nil && n < *f.min {
		return Errorf(name, "must be at least %s", fmtNum(*f.min))
	}
	if f.max != nil && n > *f.max {
		return Errorf(name, "must be at most %s", fmtNum(*f.max))
	}
	if enum := f.values(); len(enum) > 0 && asText != "" && !inEnum(enum, asText) {
		return Errorf(name, "must be one of %s", strings.Join(enum, ", "))
	}
	return nil
}

func checkCount(f *field, name string, n, depth int) error {
	max := DefaultMaxItems
	if depth == 0 {
		if f.minItems != nil && n < *f.minItems {
			return Errorf(name, "must have at least %d items", *f.minItems)
		}
		if f.maxItems != nil {
			max = *f.maxItems
		}
	}
	if n > max {
		return Errorf(name, "must have at most %d items", max)
	}
	return nil
}

// checkString applies a string rule (and an enum) to s.
func checkString(r strRule, enum []string, name, s string) error {
	if !utf8.ValidString(s) {
		return Errorf(name, "must be valid UTF-8")
	}
	if len(enum) > 0 {
		if !inEnum(enum, s) {
			return Errorf(name, "must be one of %s", strings.Join(enum, ", "))
		}
		return nil
	}
	if r.minLength != nil || len(s) > r.max() {
		n := utf8.RuneCountInString(s)
		if r.minLength != nil && n < *r.minLength {
			if *r.minLength == 1 {
				return Errorf(name, "must not be empty")
			}
			return Errorf(name, "must be at least %d characters", *r.minLength)
		}
		if n > r.max() {
			return Errorf(name, "must be at most %d characters", r.max())
		}
	}
	if msg := r.kind.check(s); msg != "" {
		return Errorf(name, "%s", msg)
	}
	if r.placeholders {
		if err := placeholders.Check(s); err != nil {
			return Errorf(name, "%v", err)
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

// FieldIndex maps the JSON names of the fields of the declaration t (a
// struct type), internal ones included, to their index in the struct (for
// reflect's FieldByIndex: a field of an embedded declaration has the
// embedded field's index first).
func FieldIndex(t reflect.Type) map[string][]int {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	in := structInfo(t)
	m := make(map[string][]int, len(in.fields))
	for _, f := range in.fields {
		m[f.name] = f.index
	}
	return m
}

// ---- reflection cache ----

var timeType = reflect.TypeOf(time.Time{})

type field struct {
	index              []int
	name               string
	typ                reflect.Type
	required, readonly bool
	internal           bool
	nullable           bool
	secret             bool
	min, max           *float64
	str                strRule // the field's strings (itself, items, map values)
	keys               strRule // a map's keys
	minItems, maxItems *int
	enum               []string
	enumRef            string   // enum=@name: the values of RegisterEnum(name)
	extension          []string // enum values beyond the contract's
	format, doc        string
}

// values are the field's allowed values (nil: any).
func (f *field) values() []string {
	if f.enumRef == "" {
		return f.enum
	}
	enumMu.RLock()
	fn := enums[f.enumRef]
	enumMu.RUnlock()
	if fn == nil {
		return nil // nothing registered it (a program without the list's owner)
	}
	return fn()
}

var (
	enumMu sync.RWMutex
	enums  = map[string]func() []string{}
)

// RegisterEnum names a list of allowed values that is known only at run
// time (the registered plugin types): a field tagged enum=@name allows the
// values fn returns when it is checked or its JSON Schema is built.
func RegisterEnum(name string, fn func() []string) {
	enumMu.Lock()
	defer enumMu.Unlock()
	enums[name] = fn
}

type info struct {
	fields []*field
	byName map[string]*field // by JSON name
}

var cache sync.Map // reflect.Type -> *info

func structInfo(t reflect.Type) *info {
	if v, ok := cache.Load(t); ok {
		return v.(*info)
	}
	in := &info{}
	addFields(in, t, nil)
	in.byName = make(map[string]*field, len(in.fields))
	for _, f := range in.fields {
		in.byName[f.name] = f
	}
	cache.Store(t, in)
	return in
}

// addFields adds the fields of the struct type t, whose index in the
// declaration starts with index (the embedded struct t is at). The fields
// of an exported embedded struct without a JSON name are the
// declaration's own, as encoding/json reads and writes them: a part that
// several declarations share (plugins.Instance) is declared once.
func addFields(in *info, t reflect.Type, index []int) {
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		fi := append(slices.Clip(index), i)
		if sf.Anonymous && name == "" && sf.Type.Kind() == reflect.Struct {
			addFields(in, sf.Type, fi)
			continue
		}
		if name == "" {
			name = sf.Name
		}
		f := &field{index: fi, name: name, typ: sf.Type, doc: sf.Tag.Get("doc")}
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
			case "writeonly":
			case "nullable":
				f.nullable = true
			case "notnull":
				f.nullable = false
			case "min":
				f.min = parseF(v)
			case "max":
				f.max = parseF(v)
			case "minLength":
				f.str.minLength = parseI(v)
			case "maxLength":
				f.str.maxLength = parseI(v)
			case "keys":
				f.keys.kind = parseKind(v)
			case "minItems":
				f.minItems = parseI(v)
			case "maxItems":
				f.maxItems = parseI(v)
			case "enum":
				if name, ok := strings.CutPrefix(v, "@"); ok {
					f.enumRef = name
				} else {
					f.enum = strings.Split(v, "|")
				}
			case "extension":
				f.extension = strings.Split(v, "|")
			case "format":
				f.format = v
			case "placeholders":
				f.str.placeholders = true
			case "secret":
				f.secret = true
			case "":
			default:
				f.str.kind = parseKind(k)
			}
		}
		in.fields = append(in.fields, f)
	}
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

// ---- string kinds ----

// strKind is what a string holds (see the package documentation).
type strKind string

const (
	kindLine        strKind = ""
	kindName        strKind = "name"
	kindHost        strKind = "host"
	kindPath        strKind = "path"
	kindHeaderName  strKind = "header_name"
	kindHeaderValue strKind = "header_value"
	kindText        strKind = "text"
	kindURL         strKind = "url"
)

var kindMax = map[strKind]int{
	kindLine: 4096, kindName: 255, kindHost: 253, kindPath: 4096,
	kindHeaderName: 256, kindHeaderValue: 8192, kindText: 65536, kindURL: 4096,
}

func parseKind(s string) strKind {
	k := strKind(s)
	if _, ok := kindMax[k]; !ok || s == "" {
		panic("schema: unknown tag option or string kind: " + s)
	}
	return k
}

// strRule is the rule of a string: its kind and length bounds.
type strRule struct {
	kind                 strKind
	minLength, maxLength *int
	placeholders         bool // only allowed placeholders (see the tag)
}

func (r strRule) max() int {
	if r.maxLength != nil {
		return *r.maxLength
	}
	return kindMax[r.kind]
}

// check returns what is wrong with s for its kind ("" when nothing is).
func (k strKind) check(s string) string {
	for _, c := range s {
		if c < 0x20 || c == 0x7f {
			if k == kindText && (c == '\t' || c == '\n' || c == '\r') {
				continue
			}
			return fmt.Sprintf("must not contain control characters (found %U)", c)
		}
	}
	switch k {
	case kindName:
		if s != "" && strings.TrimSpace(s) == "" {
			return "must not be blank"
		}
	case kindHost:
		for _, c := range s {
			if !isHostChar(c) {
				if c == ' ' {
					return "must not contain spaces"
				}
				return fmt.Sprintf("must be a host name or IP address (%q is not allowed)", c)
			}
		}
	case kindHeaderName:
		for _, c := range s {
			if c >= utf8.RuneSelf || !isTokenChar(byte(c)) {
				return fmt.Sprintf("must be a valid header name (%q is not allowed)", c)
			}
		}
	case kindURL:
		if s != "" {
			if _, err := HTTPURL(s); err != nil {
				return err.Error()
			}
		}
	}
	return ""
}

func isHostChar(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune(".-_*:%[]", c)
}

// isTokenChar is RFC 9110's tchar.
func isTokenChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// pattern is the kind's rule as an ECMA-262 (and RE2) regular expression,
// for the JSON Schema.
func (k strKind) pattern() string {
	switch k {
	case kindHost:
		return `^[A-Za-z0-9._*:%\[\]-]*$`
	case kindHeaderName:
		return "^[!#$%&'*+.^_`|~0-9A-Za-z-]*$"
	case kindText:
		return `^[^\x00-\x08\x0B\x0C\x0E-\x1F\x7F]*$`
	case kindURL:
		return `^$|^https?://[^\x00-\x1F\x7F]*$`
	}
	return `^[^\x00-\x1F\x7F]*$`
}

// ClampMax lowers every top-level number of v (a pointer to a struct) that
// is above its field's max to that max, and returns the JSON names of the
// fields it lowered. It is for values stored before the bound existed (an
// upgraded store), never for input, which Check refuses instead.
func ClampMax(v any) []string {
	return eachField(v, func(f *field) bool { return f.max != nil && !f.readonly && !f.internal },
		func(f *field, fv reflect.Value) bool {
			switch fv.Kind() {
			case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
				if float64(fv.Int()) > *f.max {
					fv.SetInt(int64(*f.max))
					return true
				}
			case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
				if float64(fv.Uint()) > *f.max {
					fv.SetUint(uint64(*f.max))
					return true
				}
			case reflect.Float32, reflect.Float64:
				if fv.Float() > *f.max {
					fv.SetFloat(*f.max)
					return true
				}
			}
			return false
		})
}

// RewritePlaceholderValues applies fn to every string of v's top-level
// fields tagged placeholders (a string, the items of a slice, the values
// of a map) and returns the JSON names of the fields it changed. Like
// ClampMax, it is for stored values (placeholders.EscapeDenied).
func RewritePlaceholderValues(v any, fn func(string) string) []string {
	rewrite := func(sv reflect.Value) bool {
		if s := fn(sv.String()); s != sv.String() {
			sv.SetString(s)
			return true
		}
		return false
	}
	return eachField(v, func(f *field) bool { return f.str.placeholders && !f.readonly && !f.internal },
		func(_ *field, fv reflect.Value) bool {
			changed := false
			switch fv.Kind() {
			case reflect.String:
				changed = rewrite(fv)
			case reflect.Slice:
				for i := 0; i < fv.Len(); i++ {
					if e := fv.Index(i); e.Kind() == reflect.String && rewrite(e) {
						changed = true
					}
				}
			case reflect.Map:
				if fv.Type().Elem().Kind() != reflect.String {
					return false
				}
				for _, k := range fv.MapKeys() {
					old := fv.MapIndex(k).String()
					if s := fn(old); s != old {
						fv.SetMapIndex(k, reflect.ValueOf(s).Convert(fv.Type().Elem()))
						changed = true
					}
				}
			}
			return changed
		})
}

// eachField calls fn with every top-level field of v (a pointer to a
// struct) that want picks, its value dereferenced (nil pointers skipped),
// and returns the JSON names of the fields fn reports changed.
func eachField(v any, want func(*field) bool, fn func(f *field, fv reflect.Value) bool) []string {
	return walkFields(v, want, func(f *field, fv reflect.Value) []string {
		if fn(f, fv) {
			return []string{f.name}
		}
		return nil
	})
}

// walkFields calls fn with every top-level field of v (a pointer to a
// struct) that want picks, its value dereferenced (nil pointers skipped),
// and returns the names fn returns, in field order.
func walkFields(v any, want func(*field) bool, fn func(f *field, fv reflect.Value) []string) []string {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return nil
		}
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct {
		return nil
	}
	var names []string
	for _, f := range structInfo(rv.Type()).fields {
		if !want(f) {
			continue
		}
		fv := rv.FieldByIndex(f.index)
		if fv.Kind() == reflect.Pointer {
			if fv.IsNil() {
				continue
			}
			fv = fv.Elem()
		}
		names = append(names, fn(f, fv)...)
	}
	return names
}
