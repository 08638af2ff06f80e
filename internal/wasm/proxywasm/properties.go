package proxywasm

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"net/http"
	"strconv"
	"strings"
)

func hostGetProperty(ctx context.Context, in *Instance, a []uint64) Status {
	path, ok := in.read(u32(a[0]), u32(a[1]))
	if !ok {
		return StatusInvalidMemoryAccess
	}
	v, st := in.property(propertyPath(path))
	if st != StatusOK {
		return st
	}
	return in.returnBytes(ctx, v, u32(a[2]), u32(a[3]))
}

// propertyPath turns a NUL-separated path (or, without NUL, a dotted one)
// into its segments; a trailing NUL is ignored.
func propertyPath(p []byte) []string {
	p = bytes.TrimRight(p, "\x00")
	if bytes.IndexByte(p, 0) >= 0 {
		return strings.Split(string(p), "\x00")
	}
	s := string(p)
	// request.headers.<name>: the name may itself contain dots
	if rest, ok := strings.CutPrefix(s, "request.headers."); ok {
		return []string{"request", "headers", rest}
	}
	return strings.Split(s, ".")
}

func int64Bytes(v int64) []byte {
	return binary.LittleEndian.AppendUint64(nil, uint64(v))
}

func hostPort(addr string) (string, int64) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, 0
	}
	n, _ := strconv.ParseInt(port, 10, 64)
	return host, n
}

func (in *Instance) property(path []string) ([]byte, Status) {
	cfg := &in.plugin.cfg
	if len(path) == 1 {
		switch path[0] {
		case "plugin_name":
			return []byte(cfg.Name), StatusOK
		case "plugin_root_id":
			return []byte(cfg.RootID), StatusOK
		case "plugin_vm_id":
			return []byte(cfg.VMID), StatusOK
		}
		return nil, StatusNotFound
	}
	ex := in.ex
	if ex == nil || len(path) < 2 {
		return nil, StatusNotFound
	}
	r := ex.Request
	switch path[0] {
	case "request":
		if len(path) == 3 && path[1] == "headers" {
			vs := r.Header.Values(path[2])
			if len(vs) == 0 {
				return nil, StatusNotFound
			}
			return []byte(strings.Join(vs, ",")), StatusOK
		}
		if len(path) != 2 {
			return nil, StatusNotFound
		}
		switch path[1] {
		case "path":
			return []byte(r.URL.RequestURI()), StatusOK
		case "url_path":
			return []byte(r.URL.EscapedPath()), StatusOK
		case "query":
			return []byte(r.URL.RawQuery), StatusOK
		case "method":
			return []byte(r.Method), StatusOK
		case "host":
			return []byte(r.Host), StatusOK
		case "scheme":
			return []byte(scheme(r)), StatusOK
		case "protocol":
			return []byte(r.Proto), StatusOK
		case "id":
			if ex.RequestID == "" {
				return nil, StatusNotFound
			}
			return []byte(ex.RequestID), StatusOK
		case "useragent":
			return []byte(r.UserAgent()), StatusOK
		case "referer":
			return []byte(r.Referer()), StatusOK
		case "headers":
			return serializePairs(headerPairs(nil, r.Header)), StatusOK
		}
	case "source":
		host, port := hostPort(r.RemoteAddr)
		switch {
		case len(path) == 2 && path[1] == "address":
			return []byte(r.RemoteAddr), StatusOK
		case len(path) == 2 && path[1] == "port":
			return int64Bytes(port), StatusOK
		case len(path) == 2 && path[1] == "ip":
			return []byte(host), StatusOK
		}
	case "destination":
		local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		if local == nil {
			return nil, StatusNotFound
		}
		_, port := hostPort(local.String())
		switch {
		case len(path) == 2 && path[1] == "address":
			return []byte(local.String()), StatusOK
		case len(path) == 2 && path[1] == "port":
			return int64Bytes(port), StatusOK
		}
	case "response":
		if len(path) == 2 && path[1] == "code" && ex.ResponseStatus != 0 {
			return int64Bytes(int64(ex.ResponseStatus)), StatusOK
		}
	}
	return nil, StatusNotFound
}
