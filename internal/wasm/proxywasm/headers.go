package proxywasm

import (
	"encoding/binary"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// Header maps (proxy_map_type_t).
const (
	mapRequestHeaders   = 0
	mapRequestTrailers  = 1
	mapResponseHeaders  = 2
	mapResponseTrailers = 3
	mapLastKnown        = 7 // gRPC metadata and HTTP call maps: never available
)

type pair struct{ k, v string }

// maxHeaderMapBytes bounds a header map a module writes, measured as the
// ABI serializes it (names, values and 10 bytes of framing per value;
// pseudo-headers aside), and a serialized map it hands the host. The host
// copies names and values into the gateway's heap, out of reach of the
// module's memory limit: without a bound, a module adding a header in a
// loop allocates gigabytes per request. 1 MiB is net/http's default
// MaxHeaderBytes.
const maxHeaderMapBytes = 1 << 20

// fieldBytes is what one header value adds to its map's size.
func fieldBytes(k, v string) int { return len(k) + len(v) + 10 }

// headerBytes is the size of h as maxHeaderMapBytes counts it.
func headerBytes(h http.Header) int {
	n := 0
	for k, vs := range h {
		for _, v := range vs {
			n += fieldBytes(k, v)
		}
	}
	return n
}

// serializePairs encodes a header map as the ABI serializes it: the pair
// count, each key and value size, then each key and value followed by NUL
// (integers little-endian).
func serializePairs(ps []pair) []byte {
	size := 4 + 8*len(ps)
	for _, p := range ps {
		size += len(p.k) + len(p.v) + 2
	}
	b := make([]byte, size)
	binary.LittleEndian.PutUint32(b, uint32(len(ps)))
	off := 4
	for _, p := range ps {
		binary.LittleEndian.PutUint32(b[off:], uint32(len(p.k)))
		binary.LittleEndian.PutUint32(b[off+4:], uint32(len(p.v)))
		off += 8
	}
	for _, p := range ps {
		off += copy(b[off:], p.k) + 1
		off += copy(b[off:], p.v) + 1
	}
	return b
}

// deserializePairs decodes a serialized map; an empty map may be empty
// bytes or a single NUL.
func deserializePairs(b []byte) ([]pair, bool) {
	if len(b) == 0 || (len(b) == 1 && b[0] == 0) {
		return nil, true
	}
	// A map beyond the bound is refused before its pairs are allocated
	// (up to one per 8 bytes of the module's memory).
	if len(b) < 4 || len(b) > 4+maxHeaderMapBytes {
		return nil, false
	}
	n := int(binary.LittleEndian.Uint32(b))
	if n > (len(b)-4)/8 {
		return nil, false
	}
	off := 4 + 8*n
	ps := make([]pair, 0, n)
	for i := 0; i < n; i++ {
		kl := int(binary.LittleEndian.Uint32(b[4+8*i:]))
		vl := int(binary.LittleEndian.Uint32(b[8+8*i:]))
		if kl < 0 || vl < 0 || kl > len(b)-off || kl+1+vl+1 > len(b)-off {
			return nil, false
		}
		k := string(b[off : off+kl])
		off += kl + 1
		v := string(b[off : off+vl])
		off += vl + 1
		ps = append(ps, pair{k, v})
	}
	return ps, true
}

func countHeader(h http.Header) int {
	n := 0
	for _, vs := range h {
		n += len(vs)
	}
	return n
}

func countRequestHeaders(r *http.Request) int { return 4 + countHeader(r.Header) }

// headerPairs lists h with lower-case names in a stable order.
func headerPairs(ps []pair, h http.Header) []pair {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		lk := strings.ToLower(k)
		for _, v := range h[k] {
			ps = append(ps, pair{lk, v})
		}
	}
	return ps
}

func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// headerMap resolves a map id for the current exchange. write asks for
// modification, allowed only in the map's own phase.
func (in *Instance) headerMap(mt uint32, write bool) (*http.Header, Status) {
	if mt > mapLastKnown {
		return nil, StatusBadArgument
	}
	ex := in.ex
	if ex == nil || mt > mapResponseTrailers {
		return nil, StatusNotFound
	}
	switch mt {
	case mapRequestHeaders, mapRequestTrailers:
		if write && in.phase != phaseRequest {
			return nil, StatusBadArgument
		}
		if mt == mapRequestHeaders {
			return &ex.Request.Header, StatusOK
		}
		return &ex.RequestTrailer, StatusOK
	default:
		if ex.ResponseHeader == nil {
			return nil, StatusNotFound
		}
		if write && in.phase != phaseResponse {
			return nil, StatusBadArgument
		}
		if mt == mapResponseHeaders {
			return &ex.ResponseHeader, StatusOK
		}
		return &ex.ResponseTrailer, StatusOK
	}
}

func (in *Instance) mapPairs(mt uint32) ([]pair, Status) {
	h, st := in.headerMap(mt, false)
	if st != StatusOK {
		return nil, st
	}
	var ps []pair
	switch mt {
	case mapRequestHeaders:
		r := in.ex.Request
		ps = make([]pair, 0, 4+len(*h))
		ps = append(ps, pair{":authority", r.Host}, pair{":method", r.Method}, pair{":path", r.URL.RequestURI()}, pair{":scheme", scheme(r)})
	case mapResponseHeaders:
		ps = make([]pair, 0, 1+len(*h))
		ps = append(ps, pair{":status", strconv.Itoa(in.ex.ResponseStatus)})
	}
	return headerPairs(ps, *h), StatusOK
}

func (in *Instance) mapGet(mt uint32, key string) (string, Status) {
	h, st := in.headerMap(mt, false)
	if st != StatusOK {
		return "", st
	}
	key = strings.ToLower(key)
	if strings.HasPrefix(key, ":") {
		switch {
		case mt == mapRequestHeaders:
			r := in.ex.Request
			switch key {
			case ":authority":
				return r.Host, StatusOK
			case ":method":
				return r.Method, StatusOK
			case ":path":
				return r.URL.RequestURI(), StatusOK
			case ":scheme":
				return scheme(r), StatusOK
			}
		case mt == mapResponseHeaders && key == ":status":
			return strconv.Itoa(in.ex.ResponseStatus), StatusOK
		}
		return "", StatusNotFound
	}
	vs := (*h)[http.CanonicalHeaderKey(key)]
	if len(vs) == 0 {
		return "", StatusNotFound
	}
	if len(vs) == 1 {
		return vs[0], StatusOK
	}
	return strings.Join(vs, ","), StatusOK
}

// mapSet adds (add) or replaces a value. Names and values must be valid
// HTTP fields: a module cannot split headers or responses.
func (in *Instance) mapSet(mt uint32, key, value string, add bool) Status {
	h, st := in.headerMap(mt, true)
	if st != StatusOK {
		return st
	}
	key = strings.ToLower(key)
	if strings.HasPrefix(key, ":") {
		return in.setPseudo(mt, key, value)
	}
	if !httpguts.ValidHeaderFieldName(key) || !httpguts.ValidHeaderFieldValue(value) {
		return StatusBadArgument
	}
	size := headerBytes(*h) + fieldBytes(key, value)
	if !add {
		for _, v := range h.Values(key) {
			size -= fieldBytes(key, v)
		}
	}
	if size > maxHeaderMapBytes {
		return StatusBadArgument
	}
	if *h == nil {
		*h = http.Header{}
	}
	if add {
		h.Add(key, value)
	} else {
		h.Set(key, value)
	}
	return StatusOK
}

func (in *Instance) setPseudo(mt uint32, key, value string) Status {
	switch mt {
	case mapRequestHeaders:
		r := in.ex.Request
		switch key {
		case ":authority":
			if !httpguts.ValidHostHeader(value) || value == "" {
				return StatusBadArgument
			}
			r.Host = value
			return StatusOK
		case ":method":
			if !validMethod(value) {
				return StatusBadArgument
			}
			r.Method = value
			return StatusOK
		case ":path":
			u, err := url.ParseRequestURI(value)
			if err != nil || !strings.HasPrefix(value, "/") || u.Host != "" {
				return StatusBadArgument
			}
			r.URL.Path, r.URL.RawPath, r.URL.RawQuery = u.Path, u.RawPath, u.RawQuery
			r.RequestURI = value
			return StatusOK
		case ":scheme":
			// the scheme of the upstream connection is the route's, not the module's
			return StatusOK
		}
	case mapResponseHeaders:
		if key == ":status" {
			code, err := strconv.Atoi(value)
			if err != nil || code < 200 || code > 599 {
				return StatusBadArgument
			}
			in.ex.ResponseStatus = code
			return StatusOK
		}
	}
	return StatusBadArgument
}

func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for i := 0; i < len(m); i++ {
		if !httpguts.IsTokenRune(rune(m[i])) {
			return false
		}
	}
	return true
}

func (in *Instance) mapRemove(mt uint32, key string) Status {
	h, st := in.headerMap(mt, true)
	if st != StatusOK {
		return st
	}
	key = strings.ToLower(key)
	if strings.HasPrefix(key, ":") {
		return StatusOK // pseudo-headers cannot be removed
	}
	h.Del(key)
	return StatusOK
}

func (in *Instance) mapSetPairs(mt uint32, ps []pair) Status {
	h, st := in.headerMap(mt, true)
	if st != StatusOK {
		return st
	}
	// validate everything before changing anything (deserializePairs
	// bounded the map's size)
	for _, p := range ps {
		k := strings.ToLower(p.k)
		if strings.HasPrefix(k, ":") {
			continue
		}
		if !httpguts.ValidHeaderFieldName(k) || !httpguts.ValidHeaderFieldValue(p.v) {
			return StatusBadArgument
		}
	}
	fresh := http.Header{}
	for _, p := range ps {
		k := strings.ToLower(p.k)
		if strings.HasPrefix(k, ":") {
			if st := in.setPseudo(mt, k, p.v); st != StatusOK {
				return st
			}
			continue
		}
		fresh.Add(k, p.v)
	}
	if *h == nil {
		*h = fresh
		return StatusOK
	}
	// keep the map's identity (a response writer's header map)
	for k := range *h {
		delete(*h, k)
	}
	for k, v := range fresh {
		(*h)[k] = v
	}
	return StatusOK
}
