// Package streams proxies raw TCP stream routes: a connection accepted on a
// route's listen_addr goes to one of its service's targets, chosen by the
// service's algorithm, within its connect timeout, trying other targets on
// failure up to its retries.
//
// Listeners bind once, when the gateway first loads its stored config (the
// spec: stream-route listener addresses bind only at process start); every
// later config only swaps the route table, so changing a route's service
// applies live (to new connections) while listen_addr changes wait for a
// restart; a route that leaves the table (deleted, disabled, or moved to
// another listen_addr) has its open connections closed. The Server
// belongs to the gateway app's control plane, which outlives reloads, so
// listeners and counters survive them.
//
// Its tests run a real gateway with TCP upstreams on 127.0.0.1:
// app/tests/streams_test.go (API, traffic, retry past a dead target).
package streams

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-gateway/gateway/internal/guard"
	"github.com/caddy-gateway/gateway/internal/lb"
)

// Route is one compiled stream route.
type Route struct {
	ID         int64  `json:"id"`
	ListenAddr string `json:"listen_addr"`
	ServiceID  int64  `json:"service_id"`
	// Targets are the dial addresses of the service's enabled targets.
	Targets          []string       `json:"targets,omitempty"`
	Algorithm        string         `json:"algorithm,omitempty"`
	Weights          map[string]int `json:"weights,omitempty"`
	ConnectTimeoutMS int64          `json:"connect_timeout_ms,omitempty"`
	// IdleTimeoutMS closes a connection on which neither side sent
	// anything for that long (the service's read_timeout_ms); 0 never.
	IdleTimeoutMS int64 `json:"idle_timeout_ms,omitempty"`
	// WriteTimeoutMS bounds each write to either side (the service's
	// write_timeout_ms); 0 none.
	WriteTimeoutMS int64 `json:"write_timeout_ms,omitempty"`
	Retries        int   `json:"retries,omitempty"`
}

// Counts are a stream route's connection counters.
type Counts struct {
	Active int64 `json:"active"`
	Total  int64 `json:"total"`
}

// Server owns the stream listeners of the process.
type Server struct {
	mu        sync.Mutex
	listeners map[string]boundListener // by listen address
	bound     bool
	table     atomic.Pointer[map[string]*liveRoute] // by listen address
	counts    sync.Map                              // route id → *counter
	accepted  atomic.Int64                          // connections of every route, deleted ones included
	logger    atomic.Pointer[zap.Logger]
	conns     sync.WaitGroup
	health    lb.HealthSource

	// max bounds the stream connections open at once, every route
	// together (MaxConnections); inflight counts them from their accept,
	// refused those closed past the bound since the last log line.
	max, inflight, refused atomic.Int64
	refusedLog             atomic.Int64 // when the last refusal was logged (Unix ns)

	// open are the proxied connections, so that a route's removal (and
	// Close, past its deadline) can end them: a disabled or deleted
	// route carries nothing, open connections included.
	openMu sync.Mutex
	open   map[*stream]struct{}
}

// stream is one proxied connection: the route it was accepted for and its
// two ends (upstream nil until dialled).
type stream struct {
	addr     string
	routeID  int64
	client   net.Conn
	upstream net.Conn
	cut      bool
}

type liveRoute struct {
	Route
	balancer *lb.Balancer
}

type counter struct{ active, total atomic.Int64 }

// boundListener is a listener bound at start and the route it was bound
// for: that route keeps it until the next start, whatever its stored
// listen address says since.
type boundListener struct {
	net.Listener
	route int64
}

// NewServer returns a server with no listeners that steers by health.
func NewServer(health lb.HealthSource) *Server {
	s := &Server{listeners: map[string]boundListener{}, health: health, open: map[*stream]struct{}{}}
	empty := map[string]*liveRoute{}
	s.table.Store(&empty)
	s.logger.Store(zap.NewNop())
	s.max.Store(MaxConnections(openFileLimit()))
	return s
}

// MaxConnections is the bound on the stream connections the process holds
// open at once, every route together, for an open-file limit of nofile
// (0: unknown): an eighth of it, between 64 and 65536. A connection takes
// two descriptors, six while both its timeouts are off (the kernel's
// splice moves the data through a pipe each way), so stream clients never
// hold more than three quarters of the descriptors: without a bound they
// could take all of them, and the HTTP proxy and the admin API could
// accept nothing. At 65536, idle connections hold about 650 MB.
func MaxConnections(nofile uint64) int64 {
	n := nofile / 8
	if nofile == 0 || n > 65536 {
		n = 65536
	}
	return max(int64(n), 64)
}

// Apply makes routes the live table. The first call of the process (or the
// first after Close) also binds every route's listen address; an address
// that cannot be bound is logged and skipped (the rest of the gateway must
// still start). Listen address changes take effect at the next start: a
// route whose listen address changed keeps being served on the listener
// it was bound for (its other changes apply live), before a route since
// stored on that address.
func (s *Server) Apply(routes []Route, logger *zap.Logger) {
	if logger != nil {
		s.logger.Store(logger)
	}
	s.mu.Lock()
	fresh := map[string]net.Listener{} // bound by this call, accepting once the table is stored
	if !s.bound {
		s.bound = true
		for _, r := range routes {
			if _, ok := s.listeners[r.ListenAddr]; ok {
				continue
			}
			ln, err := net.Listen("tcp", r.ListenAddr)
			if err != nil {
				s.logger.Load().Error("stream route listener", zap.Int64("stream_route_id", r.ID), zap.String("listen_addr", r.ListenAddr), zap.Error(err))
				continue
			}
			s.listeners[r.ListenAddr] = boundListener{Listener: ln, route: r.ID}
			fresh[r.ListenAddr] = ln
		}
		if len(s.listeners) > 0 {
			s.logger.Load().Info("stream route listeners bound", zap.Int("listeners", len(s.listeners)), zap.Int64("max_connections", s.max.Load()))
		}
	}
	owners := make(map[string]int64, len(s.listeners))
	for addr, b := range s.listeners {
		owners[addr] = b.route
	}
	s.mu.Unlock()

	table := make(map[string]*liveRoute, len(routes))
	ids := make(map[int64]bool, len(routes))
	live := func(addr string, r Route) {
		r.ListenAddr = addr
		table[addr] = &liveRoute{Route: r, balancer: &lb.Balancer{
			Algorithm: r.Algorithm, ServiceID: r.ServiceID, Weights: r.Weights, Health: s.health}}
		ids[r.ID] = true
	}
	byID := make(map[int64]Route, len(routes))
	for _, r := range routes {
		live(r.ListenAddr, r)
		byID[r.ID] = r
	}
	// A route whose listen address changed keeps the listener it was bound
	// for until the next start binds the new address; a route since stored
	// on that address waits for the restart too.
	for addr, id := range owners {
		if r, ok := byID[id]; ok && r.ListenAddr != addr {
			live(addr, r)
		}
	}
	s.table.Store(&table)
	s.cutWhere(func(st *stream) bool {
		r := table[st.addr]
		return r == nil || r.ID != st.routeID
	})
	// A route that left the table leaves the counters too (its connections
	// were just cut): no stale series for deleted or disabled routes.
	s.counts.Range(func(k, _ any) bool {
		if !ids[k.(int64)] {
			s.counts.Delete(k)
		}
		return true
	})
	for addr, ln := range fresh {
		go s.accept(addr, ln)
	}
}

// Bound lists the bound listen addresses with their actual addresses.
func (s *Server) Bound() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.listeners))
	for k, ln := range s.listeners {
		out[k] = ln.Addr().String()
	}
	return out
}

// Totals counts the open connections of the process and every connection
// it accepted for a route, those of routes since removed included.
func (s *Server) Totals() Counts {
	s.openMu.Lock()
	active := int64(len(s.open))
	s.openMu.Unlock()
	return Counts{Active: active, Total: s.accepted.Load()}
}

// AllCounts returns the counters of every route in the table that had a
// connection.
func (s *Server) AllCounts() map[int64]Counts {
	out := map[int64]Counts{}
	s.counts.Range(func(k, v any) bool {
		c := v.(*counter)
		out[k.(int64)] = Counts{Active: c.active.Load(), Total: c.total.Load()}
		return true
	})
	return out
}

func (s *Server) counter(id int64) *counter {
	v, _ := s.counts.LoadOrStore(id, new(counter))
	return v.(*counter)
}

// Close stops accepting, waits up to ctx for open connections, and forgets
// the listeners (the next Apply binds again).
func (s *Server) Close(ctx context.Context) {
	s.mu.Lock()
	for k, ln := range s.listeners {
		_ = ln.Close()
		delete(s.listeners, k)
	}
	s.bound = false
	s.mu.Unlock()
	empty := map[string]*liveRoute{}
	s.table.Store(&empty)
	done := make(chan struct{})
	go func() { s.conns.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.cutWhere(func(*stream) bool { return true })
	}
	s.counts.Range(func(k, _ any) bool { s.counts.Delete(k); return true })
}

func (s *Server) accept(addr string, ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if s.inflight.Add(1) > s.max.Load() {
			s.inflight.Add(-1)
			_ = conn.Close()
			s.refuse()
			continue
		}
		s.conns.Add(1)
		go func() {
			defer s.conns.Done()
			defer s.inflight.Add(-1)
			s.serve(addr, conn)
		}()
	}
}

// refuse counts a connection closed past the bound and logs the refusals,
// at most once every 10 seconds (a flood must not flood the log too).
func (s *Server) refuse() {
	s.refused.Add(1)
	now := time.Now().UnixNano()
	prev := s.refusedLog.Load()
	if now-prev < int64(10*time.Second) || !s.refusedLog.CompareAndSwap(prev, now) {
		return
	}
	s.logger.Load().Warn("stream connection limit reached: new connections are closed",
		zap.Int64("limit", s.max.Load()), zap.Int64("refused", s.refused.Swap(0)))
}

// cutWhere closes the connections that match, both ends.
func (s *Server) cutWhere(match func(*stream) bool) {
	s.openMu.Lock()
	defer s.openMu.Unlock()
	for st := range s.open {
		if match(st) {
			st.cut = true
			_ = st.client.Close()
			if st.upstream != nil {
				_ = st.upstream.Close()
			}
			delete(s.open, st)
		}
	}
}

func (s *Server) serve(addr string, client net.Conn) {
	defer client.Close()
	// The route is looked up and the connection registered under openMu,
	// which Apply's sweep also takes after storing a table: a connection
	// either sees the new table or is swept by it.
	s.openMu.Lock()
	r := (*s.table.Load())[addr]
	if r == nil {
		s.openMu.Unlock()
		return // the route was deleted or disabled: its listener stays until restart
	}
	st := &stream{addr: addr, routeID: r.ID, client: client}
	s.open[st] = struct{}{}
	s.openMu.Unlock()
	defer func() {
		s.openMu.Lock()
		delete(s.open, st)
		s.openMu.Unlock()
	}()
	s.accepted.Add(1)
	c := s.counter(r.ID)
	c.total.Add(1)
	c.active.Add(1)
	defer c.active.Add(-1)

	upstream, err := s.dial(r, client.RemoteAddr())
	if err != nil {
		s.logger.Load().Debug("stream route: no target reachable", zap.Int64("stream_route_id", r.ID), zap.Error(err))
		return
	}
	defer upstream.Close()
	s.openMu.Lock()
	st.upstream = upstream
	cut := st.cut
	s.openMu.Unlock()
	if cut {
		return // removed while dialling
	}
	relay(client, upstream, time.Duration(r.IdleTimeoutMS)*time.Millisecond, time.Duration(r.WriteTimeoutMS)*time.Millisecond)
}

// relay copies both ways until both sides have ended, passing a half-close
// on. When neither side sends anything for idle, both connections are
// closed (nginx's proxy_timeout; a connection no one uses holds two
// descriptors and goroutines for ever otherwise), and a write to either
// side that does not finish within write closes them too (a peer that
// stops reading holds nothing). Zero durations never expire; with both
// zero the copies are io.Copy's (splice between TCP connections). One way
// runs on the caller's goroutine.
func relay(client, upstream net.Conn, idle, write time.Duration) {
	var last atomic.Int64 // when either side last sent data (Unix ns)
	last.Store(time.Now().UnixNano())
	done := make(chan struct{})
	pipe := func(dst, src net.Conn) {
		if idle <= 0 && write <= 0 {
			_, _ = io.Copy(dst, src)
		} else if !copyWithin(dst, src, idle, write, &last) {
			_ = client.Close() // ends the other way too
			_ = upstream.Close()
			return
		}
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite() // pass the half-close on
		}
	}
	go func() {
		defer close(done)
		pipe(upstream, client)
	}()
	pipe(client, upstream)
	<-done
}

// copyBufs are the copy buffers of every stream: a way holds one only
// from the moment its source has something to read until that was
// written on, so idle connections (a client that connects and sends
// nothing is the cheapest thing to hold open) cost no buffer.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// readPooledBlocking is readPooled for a connection whose readiness
// cannot be awaited without a buffer: it holds one while it waits.
func readPooledBlocking(c net.Conn) (*[]byte, int, error) {
	buf := copyBufs.Get().(*[]byte)
	n, err := c.Read(*buf)
	if n == 0 {
		copyBufs.Put(buf)
		return nil, 0, err
	}
	return buf, n, err
}

// copyWithin copies src to dst until src ends, and reports false when it
// stopped because both ways were idle for idle, or a write took longer
// than write.
func copyWithin(dst, src net.Conn, idle, write time.Duration, last *atomic.Int64) bool {
	for {
		if idle > 0 {
			_ = src.SetReadDeadline(time.Now().Add(idle))
		}
		var werr error
		buf, n, err := readPooled(src)
		if n > 0 {
			last.Store(time.Now().UnixNano())
			if write > 0 {
				_ = dst.SetWriteDeadline(time.Now().Add(write))
			}
			_, werr = dst.Write((*buf)[:n])
			copyBufs.Put(buf)
		}
		if werr != nil {
			return !isTimeout(werr)
		}
		if err == nil {
			continue
		}
		if !isTimeout(err) {
			return true // the end of src (or the other way's close)
		}
		if time.Since(time.Unix(0, last.Load())) < idle {
			continue // the other way carried data meanwhile
		}
		return false
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// dial connects to a target: healthy ones first, other targets after a
// failure, up to the service's retries.
func (s *Server) dial(r *liveRoute, remote net.Addr) (net.Conn, error) {
	clientIP, _, _ := net.SplitHostPort(remote.String())
	timeout := time.Duration(r.ConnectTimeoutMS) * time.Millisecond
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	var tried []string
	var lastErr error = errors.New("the service has no targets")
	for attempt := 0; attempt <= r.Retries; attempt++ {
		cands := r.candidates(tried, true)
		if len(cands) == 0 {
			cands = r.candidates(tried, false)
		}
		i := r.balancer.Pick(cands, clientIP)
		if i < 0 {
			break
		}
		tried = append(tried, cands[i])
		// Never the gateway admin API or Caddy's admin endpoint, however
		// the target's name resolves (a client would get raw access), nor
		// a stream listener of this process (a loop).
		conn, err := guard.Dialer(&net.Dialer{Timeout: timeout, Control: s.refuseOwnListeners}).Dial("tcp", cands[i])
		if err == nil {
			return conn, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// ErrLoop is the error of a dial whose peer is one of the process's stream
// listeners.
var ErrLoop = errors.New("the address is a stream route listener of the gateway (a loop)")

// refuseOwnListeners is a net.Dialer Control function that refuses a peer
// (after DNS) on which a stream listener of s listens. A route whose
// target is its own listen_addr, or a chain of routes back to it, would
// otherwise dial itself for every connection it accepts, each hop holding
// two descriptors and goroutines, until the process has no descriptor
// left (a TCP health check of that target starts it without a client).
func (s *Server) refuseOwnListeners(_, address string, _ syscall.RawConn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, ln := range s.listeners {
		if guard.Reaches(ln.Addr().String(), address) {
			return fmt.Errorf("%w: %s (%s)", ErrLoop, k, address)
		}
	}
	return nil
}

func (r *liveRoute) candidates(tried []string, healthyOnly bool) []string {
	out := make([]string, 0, len(r.Targets))
	for _, t := range r.Targets {
		if r.balancer.Eligible(t, healthyOnly) && !slices.Contains(tried, t) {
			out = append(out, t)
		}
	}
	return out
}
