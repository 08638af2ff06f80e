// Package configref hands modules the values that must not be written into
// Caddy's JSON config: secrets (credentials, private keys, DNS-provider
// tokens, EAB keys) and bulk tables. Everything in Caddy's config can be read
// back from Caddy's admin endpoint and may be autosaved to disk, so the
// gateway's compiler puts such values here under the version of the config
// it is about to load and writes only a reference (an opaque string such as
// "42/consumers") into the config; the modules that config provisions look
// the reference up in Provision.
//
// Values are kept for the live config version only (Retain), so that a
// module provisioned again from the live config (a Caddy reload of the same
// JSON) still finds them; a failed load drops its version (Drop).
package configref

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
)

var (
	mu     sync.RWMutex
	values = map[int64]map[string]any{}
)

// Put stores v under the config version and name and returns the reference
// to write into the config.
func Put(version int64, name string, v any) string {
	mu.Lock()
	defer mu.Unlock()
	m := values[version]
	if m == nil {
		m = map[string]any{}
		values[version] = m
	}
	m[name] = v
	return strconv.FormatInt(version, 10) + "/" + name
}

// Lookup returns the value a reference names.
func Lookup(ref string) (any, bool) {
	vs, name, ok := strings.Cut(ref, "/")
	if !ok {
		return nil, false
	}
	version, err := strconv.ParseInt(vs, 10, 64)
	if err != nil {
		return nil, false
	}
	mu.RLock()
	defer mu.RUnlock()
	v, ok := values[version][name]
	return v, ok
}

// Get returns the value a reference names as a T, with an error a config
// author can act on when it is missing or of another type.
func Get[T any](ref string) (T, error) {
	var zero T
	v, ok := Lookup(ref)
	if !ok {
		return zero, fmt.Errorf("reference %q: no such value (references are valid only in configs compiled by the gateway in this process)", ref)
	}
	t, ok := v.(T)
	if !ok {
		return zero, fmt.Errorf("reference %q holds %T, want %T", ref, v, zero)
	}
	return t, nil
}

// Retain drops the values of every version but the given one (the live
// config's, after a successful load).
func Retain(version int64) {
	mu.Lock()
	defer mu.Unlock()
	for v := range values {
		if v != version {
			delete(values, v)
		}
	}
}

// Drop removes the values of one version (a config that failed to load).
func Drop(version int64) {
	mu.Lock()
	defer mu.Unlock()
	delete(values, version)
}

// Versions lists the versions that hold values (tests).
func Versions() []int64 {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]int64, 0, len(values))
	for v := range values {
		out = append(out, v)
	}
	return out
}

// Names lists the names stored under a version, sorted (tests).
func Names(version int64) []string {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]string, 0, len(values[version]))
	for name := range values[version] {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}
