package shared

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// pgSchema is the cluster policy's table and its take function, created
// by the first node that reaches the store (under an advisory lock: nodes
// starting together would otherwise race on CREATE OR REPLACE). The table
// is unlogged: counters need no crash safety, and each take writes a row.
// The function is the Redis script's twin: one take on the key's row,
// locked, on the database's clock; it returns allowed (1 or 0), the
// current and previous windows' hits and the time in microseconds.
const pgSchema = `
SELECT pg_advisory_xact_lock(7247236712);
CREATE UNLOGGED TABLE IF NOT EXISTS gateway_rate_limits (
	key text PRIMARY KEY,
	idx bigint NOT NULL,
	curr bigint NOT NULL,
	prev bigint NOT NULL,
	expires_at timestamptz NOT NULL
);
CREATE OR REPLACE FUNCTION gateway_rate_limit_take(k text, lim bigint, win bigint, n bigint, chk boolean)
RETURNS bigint[] LANGUAGE plpgsql AS $$
DECLARE
	r gateway_rate_limits%ROWTYPE;
	now_us bigint;
	cur_idx bigint;
	frac double precision;
	c bigint := 0;
	p bigint := 0;
	ok bigint := 1;
BEGIN
	INSERT INTO gateway_rate_limits (key, idx, curr, prev, expires_at)
		VALUES (k, 0, 0, 0, clock_timestamp()) ON CONFLICT (key) DO NOTHING;
	SELECT * INTO r FROM gateway_rate_limits WHERE key = k FOR UPDATE;
	now_us := floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
	cur_idx := now_us / win;
	frac := (now_us - cur_idx * win)::double precision / win;
	IF r.idx = cur_idx THEN
		c := r.curr;
		p := r.prev;
	ELSIF r.idx = cur_idx - 1 THEN
		p := r.curr;
	END IF;
	IF chk THEN
		IF p * (1 - frac) + c < lim THEN
			c := c + 1;
		ELSE
			ok := 0;
		END IF;
	ELSE
		c := c + n;
	END IF;
	IF ok = 1 OR r.idx <> cur_idx THEN
		UPDATE gateway_rate_limits SET idx = cur_idx, curr = c, prev = p,
			expires_at = clock_timestamp() + make_interval(secs => 2 * win / 1000000.0)
			WHERE key = k;
	END IF;
	RETURN ARRAY[ok, c, p, now_us];
END $$;
`

// sweepEvery is how many probes pass between two deletions of expired
// counters (a minute).
const sweepEvery = int(time.Minute / probeInterval)

// PostgresStore counts in the PostgreSQL store the nodes share.
type PostgresStore struct {
	dsn     string
	timeout time.Duration // PostgresTimeout (longer in tests on a loaded machine)
	pool    *pgxpool.Pool
	health  health
	stop    chan struct{}

	mu       sync.Mutex
	schemaOK bool
}

var pgConn struct {
	mu    sync.Mutex
	store *PostgresStore
}

// ConfigurePostgres sets the process's PostgreSQL store for the cluster
// policy from the gateway store's DSN ("" for none: a SQLite gateway). An
// unchanged DSN keeps the connections.
func ConfigurePostgres(dsn string) error {
	pgConn.mu.Lock()
	defer pgConn.mu.Unlock()
	if cur := pgConn.store; cur != nil && cur.dsn == dsn {
		return nil
	}
	var next *PostgresStore
	if dsn != "" {
		s, err := NewPostgresStore(dsn)
		if err != nil {
			return err
		}
		next = s
	}
	if old := pgConn.store; old != nil {
		old.Close()
	}
	pgConn.store = next
	return nil
}

// Postgres is the process's PostgreSQL store (nil: none configured).
func Postgres() *PostgresStore {
	pgConn.mu.Lock()
	defer pgConn.mu.Unlock()
	return pgConn.store
}

// PostgresStatus is the state of the cluster policy's store.
func PostgresStatus() Status {
	st := Status{Fallbacks: Fallbacks("cluster")}
	s := Postgres()
	if s == nil {
		return st
	}
	st.Configured = true
	s.health.fill(&st)
	return st
}

// NewPostgresStore opens a pool of its own on dsn (so that request
// traffic never waits for the admin API's connections, nor they for it)
// and probes the store in the background until Close.
func NewPostgresStore(dsn string) (*PostgresStore, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("cluster rate-limit store: %w", err)
	}
	cfg.MaxConns = 16
	cfg.MinConns = 4 // a take rarely waits for a connection's handshake
	cfg.ConnConfig.ConnectTimeout = 2 * PostgresTimeout
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster rate-limit store: %w", err)
	}
	s := &PostgresStore{dsn: dsn, timeout: PostgresTimeout, pool: pool, stop: make(chan struct{})}
	probes := 0
	go probeLoop(&s.health, s.stop, func(ctx context.Context) error {
		if err := s.ensureSchema(ctx); err != nil {
			return err
		}
		if probes++; probes%sweepEvery == 0 {
			_, err := s.pool.Exec(ctx, "DELETE FROM gateway_rate_limits WHERE expires_at < clock_timestamp()")
			return err
		}
		return s.pool.Ping(ctx)
	})
	return s, nil
}

func (s *PostgresStore) ensureSchema(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.schemaOK {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, pgSchema); err != nil {
		return fmt.Errorf("creating the rate-limit table: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	s.schemaOK = true
	return nil
}

// Close stops the probes and closes the pool.
func (s *PostgresStore) Close() {
	close(s.stop)
	s.pool.Close()
}

// Up implements Store.
func (s *PostgresStore) Up() bool { return s.health.up.Load() }

// Take implements Store.
func (s *PostgresStore) Take(ctx context.Context, key string, limit int64, window time.Duration, n int64, check bool) (Counts, error) {
	if !s.health.up.Load() {
		return Counts{}, ErrUnavailable
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var vals []int64
	err := s.pool.QueryRow(ctx, "SELECT gateway_rate_limit_take($1, $2, $3, $4, $5)",
		key, limit, window.Microseconds(), n, check).Scan(&vals)
	if err == nil && len(vals) != 4 {
		err = errors.New("the take function answered a wrong number of values")
	}
	if err != nil {
		s.health.set(err)
		return Counts{}, fmt.Errorf("postgres: %w", err)
	}
	return Counts{Allowed: vals[0] == 1, Curr: vals[1], Prev: vals[2], Now: time.UnixMicro(vals[3])}, nil
}

// Interface guards
var _ Store = (*PostgresStore)(nil)
