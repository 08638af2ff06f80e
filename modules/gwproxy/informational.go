package gwproxy

import (
	"fmt"
	"maps"
	"net/http"
	"net/textproto"
	"sync"
)

// maxInformational bounds the informational responses forwarded per
// attempt. Once a trace takes them, net/http's transport no longer limits
// how many a target may send before its final response; a target that
// sends more fails the attempt (502).
const maxInformational = 10

// informational forwards a target's informational responses (102
// Processing, 103 Early Hints, any 1xx but 100 and 101) to the client
// while the round trip waits for the final response, as Caddy's
// reverse_proxy does. The client's 1xx carries the target's 1xx headers
// (hop-by-hop ones removed) and nothing else: the headers plugins set
// for the final response (rate-limit's, say) are held back and put back
// afterwards, where Go's httputil.ReverseProxy would drop them.
//
// 100 Continue is not forwarded: net/http's server sends it to the
// client itself when the transport first reads the client's body, and a
// second one would only confuse clients. For the same reason a request
// whose client waits for 100 Continue gets no informational responses
// at all (outbound).
type informational struct {
	w    http.ResponseWriter
	mu   sync.Mutex
	done bool // the round trip returned: w is the handler's alone again
	n    int
}

// got1xx is the trace's Got1xxResponse.
func (f *informational) got1xx(code int, header textproto.MIMEHeader) error {
	if code == http.StatusContinue {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return nil
	}
	if f.n++; f.n > maxInformational {
		return fmt.Errorf("the target sent more than %d informational responses", maxInformational)
	}
	h := f.w.Header()
	held := h.Clone()
	clear(h)
	for k, v := range header {
		h[k] = v
	}
	stripHopHeaders(h)
	f.w.WriteHeader(code)
	clear(h)
	maps.Copy(h, held)
	return nil
}

// finish ends forwarding: called when the round trip returns, before the
// final response is written.
func (f *informational) finish() {
	f.mu.Lock()
	f.done = true
	f.mu.Unlock()
}
