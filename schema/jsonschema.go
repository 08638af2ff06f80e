package schema

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
)

// Mode selects which view of a declaration a JSON Schema describes.
type Mode int

const (
	// Input is the request body: read-only fields left out, write-only kept,
	// required as tagged, defaults shown.
	Input Mode = iota
	// Output is the response body: every field except write-only ones, all
	// of them required (answers always carry every field).
	Output
)

// JSONSchema returns the JSON Schema (draft 2020-12, as OpenAPI 3.1 uses) of
// the declaration v (a struct or pointer to struct) in the given mode. Nested
// declared structs are inlined. Defaults come from v's SetDefaults.
func JSONSchema(v any, mode Mode) map[string]any {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return structSchema(t, mode)
}

func structSchema(t reflect.Type, mode Mode) map[string]any {
	var defaults map[string]any
	if mode == Input {
		p := reflect.New(t)
		if d, ok := p.Interface().(Defaulter); ok {
			d.SetDefaults()
			b, _ := json.Marshal(p.Interface())
			_ = json.Unmarshal(b, &defaults)
		}
	}
	props := map[string]any{}
	var required []string
	for _, f := range structInfo(t).fields {
		if (mode == Input && f.readonly) || f.internal {
			continue
		}
		writeOnly := isWriteOnly(t.FieldByIndex(f.index))
		if mode == Output && writeOnly {
			continue
		}
		s := typeSchema(f.typ, mode)
		if f.nullable {
			s = nullable(s)
		}
		applyTags(s, f, mode)
		if f.doc != "" {
			s["description"] = f.doc
		}
		if writeOnly {
			s["writeOnly"] = true
		}
		if d, ok := defaults[f.name]; ok && !f.required {
			s["default"] = d
		}
		props[f.name] = s
		if (mode == Input && f.required) || (mode == Output && !omitEmpty(t.FieldByIndex(f.index))) {
			required = append(required, f.name)
		}
	}
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func isWriteOnly(sf reflect.StructField) bool {
	return strings.Contains(","+sf.Tag.Get("schema")+",", ",writeonly,")
}

func omitEmpty(sf reflect.StructField) bool {
	return strings.Contains(sf.Tag.Get("json"), ",omitempty")
}

var rawMessageType = reflect.TypeOf(json.RawMessage(nil))

func typeSchema(t reflect.Type, mode Mode) map[string]any {
	if t == rawMessageType {
		return map[string]any{}
	}
	if t.Kind() == reflect.Pointer {
		return typeSchema(t.Elem(), mode)
	}
	if t == timeType {
		return map[string]any{"type": "string", "format": "date-time"}
	}
	switch t.Kind() {
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int64, reflect.Uint64:
		return map[string]any{"type": "integer", "format": "int64"}
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return map[string]any{"type": "integer", "format": "int32"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": typeSchema(t.Elem(), mode)}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": typeSchema(t.Elem(), mode)}
	case reflect.Struct:
		return structSchema(t, mode)
	case reflect.Interface:
		return map[string]any{}
	}
	return map[string]any{}
}

func nullable(s map[string]any) map[string]any {
	if typ, ok := s["type"].(string); ok {
		s["type"] = []any{typ, "null"}
	}
	return s
}

func applyTags(s map[string]any, f *field, mode Mode) {
	// Rules about the field's values go where those values are: on the
	// field's schema, on an array's items, or on a map's values.
	t := f.typ
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	target, onItems := s, false
	elem := t
	// A collection's rules: where its values' schema is, and the names of
	// its size bounds.
	var values, minSize, maxSize string
	switch {
	case t == rawMessageType:
	case (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && t.Elem().Kind() != reflect.Uint8:
		values, minSize, maxSize = "items", "minItems", "maxItems"
	case t.Kind() == reflect.Map:
		values, minSize, maxSize = "additionalProperties", "minProperties", "maxProperties"
	}
	if values != "" {
		if vals, ok := s[values].(map[string]any); ok {
			target, onItems, elem = vals, true, t.Elem()
		}
		if f.minItems != nil {
			s[minSize] = *f.minItems
		}
		if f.maxItems != nil || mode == Input {
			s[maxSize] = maxItems(f)
		}
	}
	for elem.Kind() == reflect.Pointer {
		elem = elem.Elem()
	}
	if f.min != nil {
		target["minimum"] = *f.min
	}
	if f.max != nil {
		target["maximum"] = *f.max
	}
	switch elem.Kind() {
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Uint8, reflect.Uint16, reflect.Uint32:
		// the Go type's range is part of the contract (int32 fields)
		if lo, hi := intRange(elem); mode == Input {
			if f.min == nil {
				target["minimum"], _ = strconv.ParseInt(lo, 10, 64)
			}
			if f.max == nil {
				target["maximum"], _ = strconv.ParseInt(hi, 10, 64)
			}
		}
	}
	enum := f.values()
	if elem.Kind() == reflect.String && elem != rawMessageType && len(enum) == 0 {
		if f.str.minLength != nil {
			target["minLength"] = *f.str.minLength
		}
		if f.str.maxLength != nil || mode == Input {
			target["maxLength"] = f.str.max()
		}
		if mode == Input {
			target["pattern"] = f.str.kind.pattern()
		}
	}
	if len(enum) > 0 {
		vals := make([]any, 0, len(enum))
		isInt := false
		if tt, _ := target["type"].(string); tt == "integer" {
			isInt = true
		}
		for _, e := range enum {
			if isInt {
				n, _ := strconv.ParseInt(e, 10, 64)
				vals = append(vals, n)
			} else {
				vals = append(vals, e)
			}
		}
		if f.nullable && !onItems {
			vals = append(vals, nil) // null is a value of a nullable enum too
		}
		target["enum"] = vals
		if len(f.extension) > 0 {
			target["x-extension-values"] = f.extension
		}
	}
	if f.format != "" {
		target["format"] = f.format
	} else if f.str.kind == kindURL {
		target["format"] = "uri"
	}
}

func maxItems(f *field) int {
	if f.maxItems != nil {
		return *f.maxItems
	}
	return DefaultMaxItems
}
