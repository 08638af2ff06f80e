package plugins

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-gateway/gateway/schema"
)

// Syntax is what a type's Caddyfile syntax has beyond the generic one
// (UnmarshalCaddyfile): arguments on the directive line and subdirectives
// that are not config fields.
type Syntax struct {
	// Args names the JSON fields the directive's arguments set, in order
	// (gateway_key_auth apikey x-key); a list field takes every remaining
	// argument.
	Args []string
	// Blocks are subdirectives that are not config fields (an auth
	// plugin's inline consumer blocks); each reads its own line and block
	// at the dispenser's cursor.
	Blocks map[string]func(*caddyfile.Dispenser) error
	// Aliases are other names of JSON fields as subdirectives (http-log's
	// header for headers).
	Aliases map[string]string
}

// UnmarshalCaddyfile is the Caddyfile syntax of every plugin type, derived
// from the declaration v (a pointer to the plugin struct):
//
//	gateway_<type> [<args...>] {
//	    <json_field> <args...>
//	}
//
// The block is optional (no block: all defaults). Defaults are applied first;
// each subdirective is a JSON field name of v (or one of syn.Blocks):
//
//	string, number      one argument
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
// Arguments on the directive line set syn.Args. The result is checked with
// the same rules as the admin API (schema.Check).
func UnmarshalCaddyfile(d *caddyfile.Dispenser, v any, syn Syntax) error {
	d.Next() // directive name
	if def, ok := v.(schema.Defaulter); ok {
		def.SetDefaults()
	}
	rv := reflect.ValueOf(v).Elem()
	fields := schema.FieldIndex(rv.Type())
	seen := map[string]bool{}
	if args := d.RemainingArgs(); len(args) > 0 {
		if len(syn.Args) == 0 {
			return d.Errf("unexpected argument %q: options go in a block, one subdirective per line", args[0])
		}
		for i, name := range syn.Args {
			if len(args) == 0 {
				break
			}
			f := rv.FieldByIndex(fields[name])
			take := 1
			if f.Kind() == reflect.Slice || i == len(syn.Args)-1 {
				take = len(args)
			}
			if err := setFromArgs(f, args[:take], true); err != nil {
				return d.Errf("%s: %v", name, err)
			}
			args = args[take:]
			seen[name] = true
		}
	}
	for d.NextBlock(0) {
		name := d.Val()
		if field, ok := syn.Aliases[name]; ok {
			name = field
		}
		if block, ok := syn.Blocks[name]; ok {
			if err := block(d); err != nil {
				return err
			}
			continue
		}
		i, ok := fields[name]
		if !ok {
			return d.Errf("unrecognized subdirective %q", name)
		}
		args := d.RemainingArgs()
		if d.NextBlock(1) {
			return d.Errf("%s: unexpected block", name)
		}
		if err := setFromArgs(rv.FieldByIndex(i), args, !seen[name]); err != nil {
			return d.Errf("%s: %v", name, err)
		}
		seen[name] = true
	}
	if err := schema.Check(v); err != nil {
		return d.Errf("%v", err)
	}
	return nil
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
	case reflect.Float32, reflect.Float64:
		n, err := strconv.ParseFloat(a, f.Type().Bits())
		if err != nil || math.IsNaN(n) || math.IsInf(n, 0) {
			return fmt.Errorf("%q is not a number", a)
		}
		f.SetFloat(n)
	default:
		return fmt.Errorf("unsupported field type %s", f.Type())
	}
	return nil
}
