package shared

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// takeScript is one take on a key's hash (fields i: index of the current
// fixed window, c and p: hits in it and in the previous one), on Redis's
// clock. ARGV: limit, window in microseconds, n, check (1: count one hit
// when the sliding estimate is under the limit; 0: add n). Returns
// allowed, c, p and the time in microseconds.
var takeScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local limit = tonumber(ARGV[1])
local win = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local idx = math.floor(now / win)
local frac = (now - idx * win) / win
local v = redis.call('HMGET', KEYS[1], 'i', 'c', 'p')
local i = tonumber(v[1])
local c = tonumber(v[2]) or 0
local p = tonumber(v[3]) or 0
if i == idx - 1 then
  p = c
  c = 0
elseif i ~= idx then
  p = 0
  c = 0
end
local ok = 1
if ARGV[4] == '1' then
  if p * (1 - frac) + c < limit then
    c = c + 1
  else
    ok = 0
  end
else
  c = c + n
end
if ok == 1 or i ~= idx then
  redis.call('HSET', KEYS[1], 'i', idx, 'c', c, 'p', p)
  redis.call('PEXPIRE', KEYS[1], math.floor(2 * win / 1000) + 1000)
end
return {ok, c, p, now}
`)

// keyPrefix keeps the gateway's keys apart from others in the database.
const keyPrefix = "gateway:rl:"

// RedisStore counts in Redis.
type RedisStore struct {
	url    string
	addr   string // the address without credentials, for operators
	client *redis.Client
	health health
	stop   chan struct{}
}

// redisConn is the process's Redis store (nil: none configured).
var redisConn struct {
	mu    sync.Mutex
	store *RedisStore
}

// ConfigureRedis sets the process's Redis connection from a redis:// or
// rediss:// URL ("" for none). The connection of an unchanged URL is kept
// (with its state); a changed one replaces it.
func ConfigureRedis(rawURL string) error {
	redisConn.mu.Lock()
	defer redisConn.mu.Unlock()
	if cur := redisConn.store; cur != nil && cur.url == rawURL {
		return nil
	}
	var next *RedisStore
	if rawURL != "" {
		s, err := NewRedisStore(rawURL)
		if err != nil {
			return err
		}
		next = s
	}
	if old := redisConn.store; old != nil {
		old.Close()
	}
	redisConn.store = next
	return nil
}

// Redis is the process's Redis store (nil: none configured).
func Redis() *RedisStore {
	redisConn.mu.Lock()
	defer redisConn.mu.Unlock()
	return redisConn.store
}

// NewRedisStore connects to Redis at rawURL (lazily: the first take or
// probe dials) and probes it in the background until Close.
func NewRedisStore(rawURL string) (*RedisStore, error) {
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redis URL: %w", err)
	}
	// A take never waits for more than Timeout: no retries, and the
	// request's context bounds dialing and each round trip.
	opts.MaxRetries = -1
	opts.DialTimeout = 2 * Timeout
	opts.ReadTimeout = Timeout
	opts.WriteTimeout = Timeout
	opts.ContextTimeoutEnabled = true
	opts.PoolTimeout = Timeout
	s := &RedisStore{url: rawURL, addr: RedactURL(rawURL), client: redis.NewClient(opts), stop: make(chan struct{})}
	go probeLoop(&s.health, s.stop, func(ctx context.Context) error { return s.client.Ping(ctx).Err() })
	return s, nil
}

// RedactURL is a Redis URL without its credentials: scheme, host, port
// and database.
func RedactURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	u.User = nil
	u.RawQuery, u.Fragment = "", ""
	return u.String()
}

// Close stops the probes and closes the connections.
func (s *RedisStore) Close() {
	close(s.stop)
	s.client.Close()
}

// Up implements Store.
func (s *RedisStore) Up() bool { return s.health.up.Load() }

// Status is a store's state for operators.
type Status struct {
	Configured bool       `json:"configured" doc:"A connection is configured."`
	Address    string     `json:"address,omitempty" doc:"Where it connects, without credentials."`
	Up         bool       `json:"up" doc:"The store answered the last take or probe (probed every 500 ms)."`
	LastError  string     `json:"last_error,omitempty" doc:"The last failure."`
	CheckedAt  *time.Time `json:"checked_at,omitempty" doc:"When it last answered or failed."`
	Fallbacks  int64      `json:"fallbacks" doc:"Requests counted on this node alone since it started because the store was unreachable (fault_tolerant)."`
}

// RedisStatus is the state of the process's Redis connection.
func RedisStatus() Status {
	st := Status{Fallbacks: Fallbacks("redis")}
	s := Redis()
	if s == nil {
		return st
	}
	st.Configured, st.Address = true, s.addr
	s.health.fill(&st)
	return st
}

// Take implements Store.
func (s *RedisStore) Take(ctx context.Context, key string, limit int64, window time.Duration, n int64, check bool) (Counts, error) {
	if !s.health.up.Load() {
		return Counts{}, ErrUnavailable
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	chk := "0"
	if check {
		chk = "1"
	}
	vals, err := takeScript.Run(ctx, s.client, []string{keyPrefix + key},
		strconv.FormatInt(limit, 10), strconv.FormatInt(window.Microseconds(), 10), strconv.FormatInt(n, 10), chk).Int64Slice()
	if err != nil {
		s.health.set(err)
		return Counts{}, fmt.Errorf("redis: %w", err)
	}
	if len(vals) != 4 {
		return Counts{}, fmt.Errorf("redis: the take script answered %d values", len(vals))
	}
	return Counts{Allowed: vals[0] == 1, Curr: vals[1], Prev: vals[2], Now: time.UnixMicro(vals[3])}, nil
}

// Interface guards
var _ Store = (*RedisStore)(nil)
