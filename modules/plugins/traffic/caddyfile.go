package traffic

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-gateway/gateway/schema"
)

// unmarshalCaddyfile is the Caddyfile syntax of every plugin type in this
// package, derived from the declaration v (a pointer to the plugin struct):
//
//	gateway_<type> {
//	    <json_field> <args...>
//	}
//
// The block is optional (no block: all defaults). Defaults are applied first;
// each subdirective is a JSON field name of v:
//
//	string, integer     one argument
//	bool                no argument (true) or true/false
//	nullable string     one argument
//	list of strings     the arguments (repeat the line to append; no
//	                    argument: empty list); the first use replaces the default
//	list of objects     one item per line, the object's fields as positional
//	                    arguments in declaration order (replace "re" "with")
//	map                 key value (repeat the line for more entries); JSON
//	                    values (json_set) are parsed as JSON when they are
//	                    valid JSON, else taken as a string
//
// The result is checked with the same rules as the admin API (schema.Check).
func unmarshalCaddyfile(d *caddyfile.Dispenser, v any) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.Errf("unexpected argument %q: options go in a block, one subdirective per line", d.Val())
	}
	if def, ok := v.(schema.Defaulter); ok {
		def.SetDefaults()
	}
	rv := reflect.ValueOf(v).Elem()
	fields := jsonFieldIndex(rv.Type())
	seen := map[string]bool{}
	for d.NextBlock(0) {
		name := d.Val()
		i, ok := fields[name]
		if !ok {
			return d.Errf("unrecognized subdirective %q", name)
		}
		args := d.RemainingArgs()
		if d.NextBlock(1) {
			return d.Errf("%s: unexpected block", name)
		}
		if err := setFromArgs(rv.Field(i), args, !seen[name]); err != nil {
			return d.Errf("%s: %v", name, err)
		}
		seen[name] = true
	}
	if err := schema.Check(v); err != nil {
		return d.Errf("%v", err)
	}
	return nil
}

// jsonFieldIndex maps the JSON names of t's exported fields to their index.
func jsonFieldIndex(t reflect.Type) map[string]int {
	m := map[string]int{}
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
		m[name] = i
	}
	return m
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// setFromArgs sets f from a subdirective's arguments. first: this is the
// subdirective's first line (lists and maps start empty instead of from the
// default).
func setFromArgs(f reflect.Value, args []string, first bool) error {
	switch f.Kind() {
	case reflect.Slice:
		if f.Type() == rawMessageType {
			return setScalar(f, args)
		}
		if first || f.IsNil() {
			f.Set(reflect.MakeSlice(f.Type(), 0, len(args)))
		}
		elem := f.Type().Elem()
		if elem.Kind() == reflect.Struct {
			item := reflect.New(elem).Elem()
			if def, ok := item.Addr().Interface().(schema.Defaulter); ok {
				def.SetDefaults()
			}
			var sub []int
			for i := 0; i < elem.NumField(); i++ {
				if elem.Field(i).IsExported() {
					sub = append(sub, i)
				}
			}
			if len(args) == 0 || len(args) > len(sub) {
				return fmt.Errorf("want 1 to %d arguments, got %d", len(sub), len(args))
			}
			for j, a := range args {
				if err := setScalar(item.Field(sub[j]), []string{a}); err != nil {
					return err
				}
			}
			f.Set(reflect.Append(f, item))
			return nil
		}
		for _, a := range args {
			item := reflect.New(elem).Elem()
			if err := setScalar(item, []string{a}); err != nil {
				return err
			}
			f.Set(reflect.Append(f, item))
		}
		return nil
	case reflect.Map:
		if first || f.IsNil() {
			f.Set(reflect.MakeMap(f.Type()))
		}
		if len(args) == 0 {
			return nil
		}
		if len(args) != 2 {
			return fmt.Errorf("want a key and a value, got %d arguments", len(args))
		}
		val := reflect.New(f.Type().Elem()).Elem()
		if err := setScalar(val, args[1:]); err != nil {
			return err
		}
		f.SetMapIndex(reflect.ValueOf(args[0]), val)
		return nil
	}
	return setScalar(f, args)
}

func setScalar(f reflect.Value, args []string) error {
	if f.Kind() == reflect.Bool && len(args) == 0 {
		f.SetBool(true)
		return nil
	}
	if len(args) != 1 {
		return fmt.Errorf("want one argument, got %d", len(args))
	}
	a := args[0]
	switch {
	case f.Type() == rawMessageType:
		if json.Valid([]byte(a)) {
			f.SetBytes([]byte(a))
		} else {
			b, _ := json.Marshal(a)
			f.SetBytes(b)
		}
		return nil
	case f.Kind() == reflect.Pointer:
		p := reflect.New(f.Type().Elem())
		if err := setScalar(p.Elem(), args); err != nil {
			return err
		}
		f.Set(p)
		return nil
	}
	switch f.Kind() {
	case reflect.String:
		f.SetString(a)
	case reflect.Bool:
		b, err := strconv.ParseBool(a)
		if err != nil {
			return fmt.Errorf("%q is not a boolean", a)
		}
		f.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(a, 10, f.Type().Bits())
		if err != nil {
			return fmt.Errorf("%q is not an integer", a)
		}
		f.SetInt(n)
	default:
		return fmt.Errorf("unsupported field type %s", f.Type())
	}
	return nil
}

// UnmarshalCaddyfile is the Caddyfile syntax above for plugin types declared
// in other packages (v: a pointer to the plugin struct).
func UnmarshalCaddyfile(d *caddyfile.Dispenser, v any) error { return unmarshalCaddyfile(d, v) }
