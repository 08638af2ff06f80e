package gwproxy

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// websocketNames are the RFC 6455 spellings of the WebSocket headers that
// canonicalization changes (some servers compare them case-sensitively).
var websocketNames = map[string]string{
	"Sec-Websocket-Accept":     "Sec-WebSocket-Accept",
	"Sec-Websocket-Extensions": "Sec-WebSocket-Extensions",
	"Sec-Websocket-Key":        "Sec-WebSocket-Key",
	"Sec-Websocket-Protocol":   "Sec-WebSocket-Protocol",
	"Sec-Websocket-Version":    "Sec-WebSocket-Version",
}

// tunnel is one upgraded connection pair.
type tunnel struct{ client, backend io.Closer }

func (t *tunnel) close() {
	_ = t.client.Close()
	_ = t.backend.Close()
}

// tunnel hands the client's connection to the target after a 101 answer
// and copies both ways until either side ends. The tunnel belongs to the
// handler's streams: a config reload leaves it open for StreamCloseDelay.
func (h *Handler) tunnel(w http.ResponseWriter, out *http.Request, res *http.Response) error {
	backend, ok := res.Body.(io.ReadWriteCloser)
	reqUp, resUp := upgradeType(out.Header), upgradeType(res.Header)
	if !ok || resUp == "" || !strings.EqualFold(reqUp, resUp) || !printable(resUp) {
		_ = res.Body.Close()
		return caddyhttp.Error(http.StatusBadGateway, fmt.Errorf("the target switched to protocol %q, %q was asked for", resUp, reqUp))
	}
	wh := w.Header()
	for k, v := range res.Header {
		if name, ok := websocketNames[k]; ok {
			k = name
		}
		wh[k] = append(wh[k], v...)
	}
	w.WriteHeader(res.StatusCode)
	client, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		_ = backend.Close()
		return caddyhttp.Error(http.StatusBadGateway, fmt.Errorf("switching protocols: %w", err))
	}
	t := &tunnel{client: client, backend: backend}
	if !h.streams.add(t) {
		t.close() // the handler's config is gone
		return nil
	}
	defer h.streams.remove(t)
	defer t.close()
	if err := brw.Flush(); err != nil {
		return nil
	}
	// bytes the client sent after its request that the server read ahead
	if n := brw.Reader.Buffered(); n > 0 {
		data, _ := brw.Peek(n)
		if _, err := backend.Write(data); err != nil {
			return nil
		}
	}
	errc := make(chan error, 2)
	go copyHalf(backend, client, errc)
	go copyHalf(client, backend, errc)
	// A clean end of one direction closes only that direction's write
	// side (when the destination can); anything else ends the tunnel.
	for range 2 {
		if err := <-errc; err != nil {
			return nil
		}
	}
	return nil
}

var errHalfDone = errors.New("copy done, no write side to close")

func copyHalf(dst io.Writer, src io.Reader, errc chan<- error) {
	bp := bufPool.Get().(*[]byte)
	_, err := io.CopyBuffer(writerOnly{dst}, src, *bp)
	bufPool.Put(bp)
	if err == nil {
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			err = cw.CloseWrite()
		} else {
			err = errHalfDone
		}
	}
	errc <- err
}

// writerOnly hides a ReaderFrom so CopyBuffer uses the pooled buffer.
type writerOnly struct{ io.Writer }

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// add registers t; false once the streams were closed.
func (s *streams) add(t *tunnel) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[t] = struct{}{}
	return true
}

func (s *streams) remove(t *tunnel) {
	s.mu.Lock()
	delete(s.conns, t)
	s.mu.Unlock()
}

// closeAfter closes the open tunnels after d (at once when d is 0) and
// refuses new ones.
func (s *streams) closeAfter(d time.Duration) {
	s.mu.Lock()
	s.closed = true
	open := len(s.conns)
	s.mu.Unlock()
	if open == 0 {
		return
	}
	closeAll := func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for t := range s.conns {
			t.close()
		}
	}
	if d <= 0 {
		closeAll()
		return
	}
	time.AfterFunc(d, closeAll)
}
