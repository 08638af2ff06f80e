package schema

import (
	"net/url"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// Redacted is what Redact puts in place of a secret value: the whole value
// of a secret string, map entry or opaque JSON value (json.RawMessage, as
// the JSON string "<redacted>"), or the user information and the query's
// values of a secret URL (the url kind), where collectors take credentials:
// https://<redacted>@collector.example/in?api_key=<redacted>. It is not a valid
// value of any field, and Check refuses it in a secret field, so a
// redacted answer or export sent back is never stored as the real value.
const Redacted = "<redacted>"

// Redact replaces the values of v's secret fields (`schema:"secret"`; v is a
// pointer to a declared struct) with Redacted and returns the names of the
// fields it changed ("endpoint", "headers.Authorization"). Every answer or
// export that must not carry secrets uses it.
func Redact(v any) []string {
	return walkSecrets(v, func(f *field, s string) (string, bool) {
		if s == "" {
			return s, false
		}
		if f.str.kind == kindURL {
			u, err := url.Parse(s)
			if err != nil || (u.User == nil && u.RawQuery == "") {
				return s, false
			}
			if u.RawQuery != "" {
				params := strings.Split(u.RawQuery, "&")
				for i, p := range params {
					if name, _, ok := strings.Cut(p, "="); ok {
						params[i] = name + "=" + Redacted
					} else {
						params[i] = Redacted // a bare token (?<key>)
					}
				}
				u.RawQuery = strings.Join(params, "&")
			}
			if u.User == nil {
				return u.String(), true
			}
			u.User = nil
			return strings.Replace(u.String(), "://", "://"+Redacted+"@", 1), true
		}
		return Redacted, true
	})
}

// RedactedFields names v's secret fields that hold a redacted value (an
// answer or export sent back as input).
func RedactedFields(v any) []string {
	return walkSecrets(v, func(_ *field, s string) (string, bool) {
		return s, strings.Contains(s, Redacted)
	})
}

// walkSecrets calls fn on every string of v's secret fields; fn returns the
// new value and whether to report the field.
func walkSecrets(v any, fn func(f *field, s string) (string, bool)) []string {
	return walkFields(v, func(f *field) bool { return f.secret }, func(f *field, fv reflect.Value) []string {
		var names []string
		switch {
		case fv.Type() == rawMessageType:
			// An opaque JSON value (a wasm plugin's configuration, which
			// the gateway cannot look into): redacted whole, as the JSON
			// string Redacted, so that it stays JSON.
			raw := string(trimJSONSpace(fv.Bytes()))
			if raw == "" || raw == "null" {
				return nil
			}
			if s, hit := fn(f, raw); hit {
				if fv.CanSet() && s != raw {
					fv.SetBytes([]byte(strconv.Quote(s)))
				}
				names = append(names, f.name)
			}
		case fv.Kind() == reflect.String:
			if s, hit := fn(f, fv.String()); hit {
				if fv.CanSet() {
					fv.SetString(s)
				}
				names = append(names, f.name)
			}
		case fv.Kind() == reflect.Map:
			if fv.Type().Elem().Kind() != reflect.String {
				return nil
			}
			keys := fv.MapKeys()
			sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
			for _, k := range keys {
				if s, hit := fn(f, fv.MapIndex(k).String()); hit {
					fv.SetMapIndex(k, reflect.ValueOf(s).Convert(fv.Type().Elem()))
					names = append(names, f.name+"."+k.String())
				}
			}
		}
		return names
	})
}
