package shared

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/internal/pgtest"
	"github.com/caddy-gateway/gateway/internal/redistest"
	"github.com/caddy-gateway/gateway/modules/plugins/ratelimit/slidingwindow"
)

// The cost of one decision per policy (bench/README.md): the local store,
// Redis and PostgreSQL with sync_interval_ms 0 (a round trip each), and
// the syncer (sync above 0). Keys: 1,000 clients.
func BenchmarkTake(b *testing.B) {
	const clients = 1000
	keys := make([]string, clients)
	for i := range keys {
		keys[i] = "bench/ip:10.0.0." + strconv.Itoa(i)
	}
	run := func(b *testing.B, take func(key string) bool) {
		var n atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				take(keys[n.Add(1)%clients])
			}
		})
	}
	b.Run("local", func(b *testing.B) {
		s := slidingwindow.NewStore(0)
		run(b, func(k string) bool { return s.Take(k, 1e9, time.Minute).Allowed })
	})
	direct := func(b *testing.B, s Store) {
		waitUp(b, s)
		run(b, func(k string) bool {
			c, err := s.Take(context.Background(), k, 1e9, time.Minute, 1, true)
			if err != nil {
				b.Fatal(err)
			}
			return c.Allowed
		})
	}
	synced := func(b *testing.B, s Store) {
		waitUp(b, s)
		sy := SyncerFor(s, 100*time.Millisecond)
		run(b, func(k string) bool {
			c, held, _ := sy.Take(k, 1e9, time.Minute, time.Now())
			if !held {
				c, _ = s.Take(context.Background(), k, 1e9, time.Minute, 1, true)
				sy.Seed(k, 1e9, time.Minute, c)
			}
			return c.Allowed
		})
	}
	b.Run("redis", func(b *testing.B) {
		srv := redistest.Start(b)
		s, _ := NewRedisStore(srv.URL())
		defer s.Close()
		b.Run("sync0", func(b *testing.B) { direct(b, s) })
		b.Run("sync100", func(b *testing.B) { synced(b, s) })
	})
	b.Run("cluster", func(b *testing.B) {
		pg := pgtest.Start(b)
		s, _ := NewPostgresStore(pg.DSN)
		defer s.Close()
		b.Run("sync0", func(b *testing.B) { direct(b, s) })
		b.Run("sync100", func(b *testing.B) { synced(b, s) })
	})
}
