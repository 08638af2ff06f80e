// Package pgstorage is Caddy's certificate storage (certmagic.Storage) in
// the gateway's PostgreSQL store: certificates, keys, ACME accounts and
// pending challenge tokens of every node of a cluster live in one place, so
// a certificate is obtained once, served by every node and renewed once,
// and whichever node the CA reaches answers the challenge (certmagic's
// distributed solving reads the token from the storage).
//
// Keys are rows of certmagic_data; locks are rows of certmagic_locks with
// an expiry that the holder extends while it works, so the lock of a
// crashed holder frees itself after LockTTL. Times come from the database
// server, so the nodes' clocks do not matter. The module uses the gateway's
// own connection pool (Use), not a connection string of its own.
package pgstorage

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"

	"github.com/caddy-gateway/gateway/internal/pglock"
	"github.com/caddy-gateway/gateway/internal/tick"
)

func init() {
	caddy.RegisterModule(new(Module))
}

const (
	// LockTTL is how long a lock outlives its holder's last sign of life.
	LockTTL = 10 * time.Second
	// lockRefresh is how often a holder extends its locks.
	lockRefresh = LockTTL / 3
	// lockPoll is how often a waiter tries again.
	lockPoll = 250 * time.Millisecond
)

var pool atomic.Pointer[sql.DB]

// Use makes db (the gateway's PostgreSQL pool) the storage's database and
// creates its tables when missing, under the store's schema lock (nodes of
// a cluster starting at once on a new store would otherwise race to create
// them: CREATE TABLE IF NOT EXISTS is not safe against a concurrent one).
func Use(ctx context.Context, db *sql.DB) error {
	if pool.Load() == db {
		return nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("creating the certificate storage tables: %w", err)
	}
	defer tx.Rollback()
	for _, q := range []string{
		pglock.Schema,
		`CREATE TABLE IF NOT EXISTS certmagic_data (
			key TEXT PRIMARY KEY,
			value BYTEA NOT NULL,
			modified TIMESTAMPTZ NOT NULL DEFAULT now())`,
		`CREATE TABLE IF NOT EXISTS certmagic_locks (
			name TEXT PRIMARY KEY,
			owner TEXT NOT NULL,
			expires TIMESTAMPTZ NOT NULL)`,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("creating the certificate storage tables: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("creating the certificate storage tables: %w", err)
	}
	pool.Store(db)
	return nil
}

// Module is the caddy.storage.gateway_postgres module. It has no fields:
// the database is the gateway's store.
type Module struct{}

// CaddyModule returns the Caddy module information.
func (*Module) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "caddy.storage.gateway_postgres",
		New: func() caddy.Module { return new(Module) },
	}
}

// CertMagicStorage returns the storage on the gateway's store.
func (*Module) CertMagicStorage() (certmagic.Storage, error) {
	db := pool.Load()
	if db == nil {
		return nil, errors.New("gateway_postgres storage: the gateway's PostgreSQL store is not open (database postgres)")
	}
	return New(db), nil
}

// Storage is a certmagic.Storage on a PostgreSQL database.
type Storage struct {
	db *sql.DB
}

// New returns a storage on db, whose tables exist (Use).
func New(db *sql.DB) *Storage {
	return &Storage{db: db}
}

// processOwner prefixes the owner of every lock this process takes.
var processOwner = func() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}()

// clean makes a key canonical: no leading, trailing or doubled slashes.
func clean(key string) string {
	parts := strings.Split(key, "/")
	out := parts[:0]
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, "/")
}

// likePrefix is the LIKE pattern of every key under dir.
func likePrefix(dir string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	if dir == "" {
		return "%"
	}
	return r.Replace(dir) + "/%"
}

// Store writes value under key.
func (s *Storage) Store(ctx context.Context, key string, value []byte) error {
	key = clean(key)
	if key == "" {
		return errors.New("storing: empty key")
	}
	if value == nil {
		value = []byte{}
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO certmagic_data (key, value, modified) VALUES ($1, $2, now())
		ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, modified = EXCLUDED.modified`, key, value)
	if err != nil {
		return fmt.Errorf("storing %s: %w", key, err)
	}
	return nil
}

// Load reads key's value; fs.ErrNotExist when there is none.
func (s *Storage) Load(ctx context.Context, key string) ([]byte, error) {
	var v []byte
	err := s.db.QueryRowContext(ctx, `SELECT value FROM certmagic_data WHERE key = $1`, clean(key)).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fs.ErrNotExist
	}
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", key, err)
	}
	return v, nil
}

// Delete removes key and, when key is a directory, every key under it. It
// fails only when the key may still exist.
func (s *Storage) Delete(ctx context.Context, key string) error {
	key = clean(key)
	_, err := s.db.ExecContext(ctx, `DELETE FROM certmagic_data WHERE key = $1 OR key LIKE $2`, key, likePrefix(key))
	if err != nil {
		return fmt.Errorf("deleting %s: %w", key, err)
	}
	return nil
}

// Exists reports whether key is a stored key or a directory of some.
func (s *Storage) Exists(ctx context.Context, key string) bool {
	key = clean(key)
	var one int
	err := s.db.QueryRowContext(ctx, `SELECT 1 FROM certmagic_data WHERE key = $1 OR key LIKE $2 LIMIT 1`, key, likePrefix(key)).Scan(&one)
	return err == nil
}

// List returns the keys under dir: its direct children (keys and
// directories) or, recursive, every key and directory below it, as
// certmagic's file storage does. fs.ErrNotExist when there is none.
func (s *Storage) List(ctx context.Context, dir string, recursive bool) ([]string, error) {
	dir = clean(dir)
	rows, err := s.db.QueryContext(ctx, `SELECT key FROM certmagic_data WHERE key LIKE $1 ORDER BY key`, likePrefix(dir))
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	defer rows.Close()
	seen := map[string]bool{}
	var out []string
	add := func(k string) {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	base := dir
	if base != "" {
		base += "/"
	}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("listing %s: %w", dir, err)
		}
		rest := strings.Split(strings.TrimPrefix(k, base), "/")
		if !recursive {
			add(base + rest[0])
			continue
		}
		for i := range rest {
			add(base + strings.Join(rest[:i+1], "/"))
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	if len(out) == 0 {
		return nil, fs.ErrNotExist
	}
	return out, nil
}

// Stat describes key: a stored key (terminal) or a directory of some.
func (s *Storage) Stat(ctx context.Context, key string) (certmagic.KeyInfo, error) {
	key = clean(key)
	var size int64
	var mod time.Time
	err := s.db.QueryRowContext(ctx, `SELECT length(value), modified FROM certmagic_data WHERE key = $1`, key).Scan(&size, &mod)
	if err == nil {
		return certmagic.KeyInfo{Key: key, Modified: mod, Size: size, IsTerminal: true}, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return certmagic.KeyInfo{}, fmt.Errorf("stat %s: %w", key, err)
	}
	var newest sql.NullTime
	err = s.db.QueryRowContext(ctx, `SELECT max(modified) FROM certmagic_data WHERE key LIKE $1`, likePrefix(key)).Scan(&newest)
	if err != nil {
		return certmagic.KeyInfo{}, fmt.Errorf("stat %s: %w", key, err)
	}
	if !newest.Valid {
		return certmagic.KeyInfo{}, fs.ErrNotExist
	}
	return certmagic.KeyInfo{Key: key, Modified: newest.Time, IsTerminal: false}, nil
}

// Lock takes the named lock, waiting while another holder has it (or until
// its expiry: a crashed holder stops extending it). While held, the lock
// is extended in the background.
func (s *Storage) Lock(ctx context.Context, name string) error {
	// Unique per call: two goroutines of one process must not share a
	// lock either.
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	owner := processOwner + "/" + hex.EncodeToString(b)
	for {
		res, err := s.db.ExecContext(ctx, `INSERT INTO certmagic_locks (name, owner, expires)
			VALUES ($1, $2, now() + make_interval(secs => $3))
			ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, expires = EXCLUDED.expires
			WHERE certmagic_locks.expires < now()`, name, owner, LockTTL.Seconds())
		if err != nil {
			return fmt.Errorf("taking lock %s: %w", name, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			s.keepAlive(name, owner)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(lockPoll):
		}
	}
}

// The locks this process holds (whichever Storage value took them: every
// config load makes a new one): name → owner string and keep-alive.
var (
	heldMu sync.Mutex
	held   = map[string]heldLock{}
)

type heldLock struct {
	owner string
	stop  context.CancelFunc
}

func (s *Storage) keepAlive(name, owner string) {
	ctx, cancel := context.WithCancel(context.Background())
	heldMu.Lock()
	if prev, ok := held[name]; ok {
		prev.stop() // its lease expired and was taken over: it is not held any more
	}
	held[name] = heldLock{owner: owner, stop: cancel}
	heldMu.Unlock()
	go tick.Every(ctx, lockRefresh, nil, func() {
		_, _ = s.db.ExecContext(ctx, `UPDATE certmagic_locks SET expires = now() + make_interval(secs => $3)
			WHERE name = $1 AND owner = $2`, name, owner, LockTTL.Seconds())
	})
}

// Unlock releases the named lock taken by this process.
func (s *Storage) Unlock(ctx context.Context, name string) error {
	heldMu.Lock()
	h, ok := held[name]
	if ok {
		h.stop()
		delete(held, name)
	}
	heldMu.Unlock()
	if !ok {
		return fmt.Errorf("unlocking %s: not locked by this process", name)
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM certmagic_locks WHERE name = $1 AND owner = $2`, name, h.owner); err != nil {
		return fmt.Errorf("unlocking %s: %w", name, err)
	}
	return nil
}

// Interface guards
var (
	_ caddy.StorageConverter = (*Module)(nil)
	_ certmagic.Storage      = (*Storage)(nil)
)
