package pgstorage

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/caddy-gateway/gateway/internal/pgtest"
)

func open(t *testing.T) (*Storage, *sql.DB) {
	srv := pgtest.Start(t)
	db, err := sql.Open("pgx", srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := Use(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	return New(db), db
}

// The semantics certmagic expects of a storage (its file storage is the
// reference): fs.ErrNotExist for missing keys, directories implied by
// keys, recursive deletes, recursive and flat listings.
func TestStorageSemantics(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	if _, err := s.Load(ctx, "nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing key: %v", err)
	}
	if _, err := s.Stat(ctx, "nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat missing: %v", err)
	}
	if _, err := s.List(ctx, "nope", true); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("list missing: %v", err)
	}
	keys := map[string]string{
		"certificates/acme/example.com/example.com.crt":   "crt",
		"certificates/acme/example.com/example.com.key":   "key",
		"certificates/acme/example.com/example.com.json":  "{}",
		"certificates/acme/other_1.test/other_1.test.crt": "crt2",
		"acme/users/a@b/a.json":                           "user",
		"certificates_x/look-alike":                       "x", // not under certificates/
	}
	for k, v := range keys {
		if err := s.Store(ctx, k, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Store(ctx, "certificates/acme/example.com/example.com.crt", []byte("crt-new")); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Load(ctx, "/certificates//acme/example.com/example.com.crt"); err != nil || string(b) != "crt-new" {
		t.Fatalf("load after overwrite: %q %v", b, err)
	}
	if !s.Exists(ctx, "certificates/acme") || !s.Exists(ctx, "acme/users/a@b/a.json") || s.Exists(ctx, "certificates/acm") {
		t.Fatal("Exists")
	}
	fi, err := s.Stat(ctx, "certificates/acme/example.com/example.com.key")
	if err != nil || !fi.IsTerminal || fi.Size != 3 || time.Since(fi.Modified) > time.Minute {
		t.Fatalf("stat key: %+v %v", fi, err)
	}
	if fi, err = s.Stat(ctx, "certificates/acme"); err != nil || fi.IsTerminal {
		t.Fatalf("stat dir: %+v %v", fi, err)
	}
	flat, err := s.List(ctx, "certificates/acme", false)
	if err != nil || !slices.Equal(flat, []string{"certificates/acme/example.com", "certificates/acme/other_1.test"}) {
		t.Fatalf("flat list: %v %v", flat, err)
	}
	deep, err := s.List(ctx, "certificates", true)
	want := []string{"certificates/acme", "certificates/acme/example.com",
		"certificates/acme/example.com/example.com.crt", "certificates/acme/example.com/example.com.json",
		"certificates/acme/example.com/example.com.key", "certificates/acme/other_1.test",
		"certificates/acme/other_1.test/other_1.test.crt"}
	if err != nil || !slices.Equal(deep, want) {
		t.Fatalf("recursive list:\n%v\nwant\n%v (%v)", deep, want, err)
	}
	// LIKE wildcards in a key are literal.
	if l, err := s.List(ctx, "certificates/acme/other_1.test", false); err != nil || len(l) != 1 {
		t.Fatalf("list with _: %v %v", l, err)
	}
	if l, _ := s.List(ctx, "certificates/acme/other%", true); len(l) != 0 {
		t.Fatalf("%% is a wildcard: %v", l)
	}
	if err := s.Delete(ctx, "certificates/acme/example.com"); err != nil {
		t.Fatal(err)
	}
	if s.Exists(ctx, "certificates/acme/example.com/example.com.key") || !s.Exists(ctx, "certificates/acme/other_1.test/other_1.test.crt") {
		t.Fatal("recursive delete")
	}
	if err := s.Delete(ctx, "never/was"); err != nil {
		t.Fatalf("deleting a missing key: %v", err)
	}
	if b, _ := s.Load(ctx, "certificates_x/look-alike"); string(b) != "x" {
		t.Fatal("a sibling with a common prefix was touched")
	}
}

// Locks exclude across holders, are released by Unlock, and the lock of a
// crashed holder (a row nobody extends) expires.
func TestStorageLocks(t *testing.T) {
	s, db := open(t)
	ctx := context.Background()
	other := New(db) // another node: same table, its own Storage
	if err := s.Lock(ctx, "issue_cert_a"); err != nil {
		t.Fatal(err)
	}
	// Extended past its TTL while held.
	time.Sleep(LockTTL + time.Second)
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	if err := other.Lock(short, "issue_cert_a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a held lock was taken: %v", err)
	}
	cancel()
	if err := s.Unlock(ctx, "issue_cert_a"); err != nil {
		t.Fatal(err)
	}
	if err := other.Lock(ctx, "issue_cert_a"); err != nil {
		t.Fatal(err)
	}
	if err := other.Unlock(ctx, "issue_cert_a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Unlock(ctx, "issue_cert_a"); err == nil {
		t.Fatal("unlocking a lock not held")
	}

	// Mutual exclusion under contention.
	var inside, maxInside atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := New(db)
			for j := 0; j < 3; j++ {
				if err := st.Lock(ctx, "contended"); err != nil {
					t.Error(err)
					return
				}
				n := inside.Add(1)
				if n > maxInside.Load() {
					maxInside.Store(n)
				}
				time.Sleep(20 * time.Millisecond)
				inside.Add(-1)
				if err := st.Unlock(ctx, "contended"); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if maxInside.Load() != 1 {
		t.Fatalf("%d holders at once", maxInside.Load())
	}

	// A crashed holder: its row stays, nobody extends it.
	if _, err := db.Exec(`INSERT INTO certmagic_locks (name, owner, expires) VALUES ('crashed', 'dead-process', now() + interval '2 seconds')`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.Lock(ctx, "crashed"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < time.Second {
		t.Fatalf("the crashed holder's lock was taken before it expired (%v)", d)
	}
	_ = s.Unlock(ctx, "crashed")
}
