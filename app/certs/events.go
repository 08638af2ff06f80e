package certs

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddytls"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/caddy-gateway/gateway/app/controlplane"
	"github.com/caddy-gateway/gateway/modules/certevents"
	"github.com/caddy-gateway/gateway/modules/gwtls"
	"github.com/caddy-gateway/gateway/storage"
)

// The status of ACME certificates comes from Caddy's own certificate
// events (package modules/certevents, subscribed in the compiled events
// app): the node that obtains (or fails to obtain) a certificate writes
// the result into the certificate's row, so every node and every restart
// shows the same status, last error, issuer and validity. A node loading a
// certificate another node obtained writes nothing new (same values).

// Events for names no row holds yet are kept (at most maxUnmatched) and
// tried again every unmatchedRetry for unmatchedKeep.
const (
	maxUnmatched   = 1000
	unmatchedRetry = 2 * time.Second
	unmatchedKeep  = 2 * time.Minute
)

// forcedRenewalTimeout bounds a forced renewal with its retries.
const forcedRenewalTimeout = 10 * time.Minute

// recorder applies one control plane's certificate events to the store,
// one at a time and in order.
type recorder struct {
	cp     *controlplane.ControlPlane
	logger *zap.Logger
	ctx    context.Context
	cancel context.CancelFunc
	queue  chan func()
	wg     sync.WaitGroup

	mu sync.Mutex
	// unmatched: the last event of names no certificate row holds (yet: an
	// event can come before the row's transaction commits); applied again
	// when a certificate is created and every unmatchedRetry.
	unmatched map[string]certevents.Event
	renewing  map[string]bool

	// reconciled: the configuration version the last complete reconcile
	// read (-1: none yet, or a write failed since); only run's goroutine
	// uses it.
	reconciled int64
}

var (
	recordersMu sync.Mutex
	recorders   = map[*controlplane.ControlPlane]*recorder{}
)

// recorderOf is cp's recorder, started on first use; nil once stopped.
func recorderOf(cp *controlplane.ControlPlane) *recorder {
	recordersMu.Lock()
	defer recordersMu.Unlock()
	if r, ok := recorders[cp]; ok {
		return r
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &recorder{
		cp: cp, logger: cp.Logger().Named("certificates"), ctx: ctx, cancel: cancel,
		queue: make(chan func(), 256), unmatched: map[string]certevents.Event{}, renewing: map[string]bool{},
		reconciled: -1,
	}
	r.wg.Add(1)
	go r.run()
	recorders[cp] = r
	return r
}

// Events is the control plane service that stops cp's recorder (and its
// forced renewals) before the store closes.
func Events(cp *controlplane.ControlPlane) func() {
	recorderOf(cp)
	return func() {
		recordersMu.Lock()
		r := recorders[cp]
		recorders[cp] = nil // stopped: later events are dropped
		recordersMu.Unlock()
		if r != nil {
			r.cancel()
			r.wg.Wait()
		}
	}
}

// Record hands a certificate event of cp's Caddy to its recorder (the
// gateway app's certevents.Sink).
func Record(cp *controlplane.ControlPlane, ev certevents.Event) {
	if r := recorderOf(cp); r != nil {
		r.do(func() { r.apply(ev) })
	}
}

func (r *recorder) do(fn func()) {
	select {
	case r.queue <- fn:
	case <-r.ctx.Done():
	}
}

func (r *recorder) run() {
	defer r.wg.Done()
	retry := time.NewTicker(unmatchedRetry)
	defer retry.Stop()
	for {
		select {
		case fn := <-r.queue:
			fn()
		case <-retry.C:
			r.retryUnmatched()
			r.reconcile()
		case <-r.ctx.Done():
			return
		}
	}
}

// replay applies at once the held events of a new certificate's names.
func replay(cp *controlplane.ControlPlane, domains []string) {
	r := recorderOf(cp)
	if r == nil {
		return
	}
	r.do(func() {
		r.mu.Lock()
		var evs []certevents.Event
		for _, d := range domains {
			if ev, ok := r.unmatched[d]; ok {
				evs = append(evs, ev)
				delete(r.unmatched, d)
			}
		}
		r.mu.Unlock()
		r.apply(evs...)
	})
}

// retryUnmatched applies the held events again (a row created by another
// path, such as a backup import, or committed after its event), and
// forgets those older than unmatchedKeep (names of the user's own sites).
func (r *recorder) retryUnmatched() {
	r.mu.Lock()
	var evs []certevents.Event
	for name, ev := range r.unmatched {
		delete(r.unmatched, name)
		if time.Since(ev.At) < unmatchedKeep {
			evs = append(evs, ev)
		}
	}
	r.mu.Unlock()
	r.apply(evs...)
}

// reconcile records certificates Caddy already serves for rows that are
// not active: a row created while its names stayed managed (a backup
// restore replacing the rows in one change) gets no new event. Rows change
// only with the configuration version, so the store is read once per
// version this node serves (and again after a failed write), not on every
// tick. The live config is loaded before its change commits: until the
// stored version is the live one, the rows may be the old ones.
func (r *recorder) reconcile() {
	applied := r.cp.AppliedConfigVersion()
	if applied == r.reconciled {
		return
	}
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	db := r.cp.Store().DB.WithContext(ctx)
	if stored, err := storage.ConfigVersion(db); err != nil || stored != applied {
		return // unreachable, or not committed / not synced yet: the next tick tries again
	}
	var rows []Row
	if err := db.Where("acme = ? AND status <> ?", true, "active").Find(&rows).Error; err != nil {
		return // the store is unreachable: the next tick tries again
	}
	r.reconciled = applied
	var evs []certevents.Event
	for i := range rows {
		if len(rows[i].Domains) == 0 {
			continue
		}
		name := rows[i].Domains[0]
		if leaf := certevents.ServedLeaf(name); leaf != nil {
			evs = append(evs, certevents.Event{Name: name, Kind: certevents.Loaded, Leaf: leaf, At: time.Now().UTC()})
		}
	}
	r.apply(evs...)
}

// apply writes what the events say, in order, into the rows of the ACME
// certificates that hold their names. The rows are read once for all of
// them (a retry of many held events is one query), and again only after a
// write.
func (r *recorder) apply(evs ...certevents.Event) {
	if len(evs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	db := r.cp.Store().DB.WithContext(ctx)
	var rows []Row
	fresh := false
	for _, ev := range evs {
		if !fresh {
			rows = nil
			if err := db.Where("acme = ?", true).Order("id").Find(&rows).Error; err != nil {
				r.reconciled = -1
				r.logger.Warn("recording a certificate event", zap.String("identifier", ev.Name), zap.String("event", ev.Kind), zap.Error(err))
				continue
			}
			fresh = true
		}
		matched := false
		for i := range rows {
			row := &rows[i]
			if !slices.Contains(row.Domains, ev.Name) {
				continue
			}
			matched = true
			changes := update(row, ev, time.Now().UTC())
			if changes == nil {
				continue
			}
			fresh = false // the next event reads what this one wrote
			if err := db.Model(&Row{}).Where("id = ?", row.ID).Updates(changes).Error; err != nil {
				r.reconciled = -1 // the next reconcile records what Caddy serves
				r.logger.Warn("recording a certificate event", zap.Int64("certificate", row.ID), zap.String("identifier", ev.Name), zap.Error(err))
			}
		}
		if !matched {
			r.mu.Lock()
			if len(r.unmatched) < maxUnmatched {
				r.unmatched[ev.Name] = ev
			}
			r.mu.Unlock()
		}
	}
}

// update is the change ev makes to row (nil for none).
//
//   - failed: a certificate not yet issued becomes failed with the CA's or
//     the solver's message; one that is issued stays active (it is still
//     served) and shows the failed renewal in last_error.
//   - obtained (this node's order) or loaded (a certificate from the
//     shared storage went into the cache: another node's order, a
//     restart): once every name of the row has a certificate, the row is
//     active and describes its first name's certificate.
func update(row *Row, ev certevents.Event, now time.Time) map[string]any {
	switch ev.Kind {
	case certevents.Failed:
		msg := ev.Error
		if len(row.Domains) > 1 {
			msg = ev.Name + ": " + msg
		}
		status := row.Status
		if status != "active" {
			status = "failed"
		}
		if status == row.Status && row.LastError != nil && *row.LastError == msg {
			return nil
		}
		return map[string]any{"status": status, "last_error": msg, "updated_at": now}
	case certevents.Obtained, certevents.Loaded:
		leaves := make([]*x509.Certificate, len(row.Domains))
		for i, d := range row.Domains {
			if d == ev.Name {
				leaves[i] = ev.Leaf
			} else {
				leaves[i] = certevents.ServedLeaf(d)
			}
			if leaves[i] == nil {
				return nil // a name is still pending (or failed)
			}
		}
		leaf := leaves[0]
		if row.NotBefore != nil && leaf.NotBefore.UTC().Before(*row.NotBefore) {
			return nil // an older certificate than the one recorded
		}
		sum := sha256.Sum256(leaf.Raw)
		fp := hex.EncodeToString(sum[:])
		if row.Status == "active" && row.Fingerprint == fp && row.LastError == nil {
			return nil
		}
		nb, na := leaf.NotBefore.UTC(), leaf.NotAfter.UTC()
		return map[string]any{"status": "active", "issuer": issuerName(leaf), "not_before": nb, "not_after": na,
			"fingerprint": fp, "last_error": nil, "updated_at": now}
	}
	return nil
}

// managingConfig is the certmagic config that manages name in the live tls
// app: the one of the gateway's ACME issuer of the automation policy for
// name (nil when the gateway does not manage it: a dns-01 certificate
// without the Cloudflare token).
func managingConfig(tlsApp *caddytls.TLS, name string) *certmagic.Config {
	if tlsApp == nil || tlsApp.Automation == nil {
		return nil
	}
	for _, ap := range tlsApp.Automation.Policies {
		if !slices.Contains(ap.Subjects(), name) {
			continue
		}
		for _, iss := range ap.Issuers {
			if g, ok := iss.(*gwtls.ACMEIssuer); ok && g.Config() != nil {
				return g.Config()
			}
		}
		return nil
	}
	return nil
}

// forceRenewal renews the certificates of names now, whether due or not,
// in the background (with certmagic's retries, bounded): each renewed
// certificate is stored (the shared storage in a cluster), goes into the
// cache at once and is served from the next handshake (the HTTPS listener
// serves a name's newest cached certificate: gwtls.Newest); the events
// record the result. A name not yet issued is obtained.
func forceRenewal(cp *controlplane.ControlPlane, names []string) error {
	tlsApp := cp.TLSApp()
	cfgs := make([]*certmagic.Config, len(names))
	for i, n := range names {
		if cfgs[i] = managingConfig(tlsApp, n); cfgs[i] == nil {
			return fmt.Errorf("%s is not managed by the running configuration (a dns-01 certificate needs the Cloudflare token)", n)
		}
	}
	r := recorderOf(cp)
	if r == nil {
		return fmt.Errorf("the gateway is shutting down")
	}
	for i, n := range names {
		r.mu.Lock()
		busy := r.renewing[n]
		r.renewing[n] = true
		r.mu.Unlock()
		if busy {
			continue // already renewing: this request joins it
		}
		cfg := cfgs[i]
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer func() {
				r.mu.Lock()
				delete(r.renewing, n)
				r.mu.Unlock()
			}()
			ctx, cancel := context.WithTimeout(r.ctx, forcedRenewalTimeout)
			defer cancel()
			if err := cfg.RenewCertAsync(ctx, n, true); err != nil {
				r.logger.Warn("forced renewal", zap.String("identifier", n), zap.Error(err))
				return
			}
			if _, err := cfg.CacheManagedCertificate(ctx, n); err != nil {
				r.logger.Warn("loading the renewed certificate", zap.String("identifier", n), zap.Error(err))
			}
		}()
	}
	return nil
}
