package auth

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/caddy-gateway/gateway/internal/pgtest"
	"github.com/caddy-gateway/gateway/storage"
)

// The limiter's statements go through the indexes of login_failures on
// both databases: no statement of a failed login or of a login check reads
// the whole table (or the whole of an index), so their work does not grow
// with the failures of other clients.
func TestLimiterUsesIndexes(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		st, err := storage.Open("sqlite", t.TempDir()+"/gw.db")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		checkLimiterPlans(t, st.DB, func(sql string) error {
			var steps []struct{ Detail string }
			if err := st.DB.Raw("EXPLAIN QUERY PLAN " + sql).Scan(&steps).Error; err != nil {
				return err
			}
			for _, s := range steps {
				// SEARCH is an index lookup; SCAN reads a whole table or
				// index.
				if strings.HasPrefix(s.Detail, "SCAN login_failures") {
					return fmt.Errorf("%s", s.Detail)
				}
			}
			return nil
		})
	})
	t.Run("postgres", func(t *testing.T) {
		st, err := storage.Open("postgres", pgtest.Start(t).DSN)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		checkLimiterPlans(t, st.DB, func(sql string) error {
			return st.DB.Transaction(func(tx *gorm.DB) error {
				// A small table is read sequentially when that is
				// cheaper: forbid it, so only a missing index shows one.
				if err := tx.Exec("SET LOCAL enable_seqscan = off").Error; err != nil {
					return err
				}
				var lines []string
				if err := tx.Raw("EXPLAIN " + sql).Scan(&lines).Error; err != nil {
					return err
				}
				plan := strings.Join(lines, "\n")
				if strings.Contains(plan, "Seq Scan on login_failures") {
					return fmt.Errorf("%s", plan)
				}
				return nil
			})
		})
	})
}

// checkLimiterPlans records the SQL of failed logins and login checks on
// db (with a few thousand rows of other clients, some out of the window)
// and has explain judge each statement on login_failures.
func checkLimiterPlans(t *testing.T, db *gorm.DB, explain func(sql string) error) {
	now := time.Unix(1_000_000, 0).UTC()
	l := newLimiter(10, 15*time.Minute, 3000)
	l.now = func() time.Time { return now }
	rows := make([]storage.LoginFailure, 0, 4000)
	for i := range 4000 {
		rows = append(rows, storage.LoginFailure{ClientKey: fmt.Sprintf("10.0.%d.%d", i>>8, i&255), At: now.Add(time.Duration(i-2000) * time.Second)})
	}
	if err := db.CreateInBatches(rows, 500).Error; err != nil {
		t.Fatal(err)
	}
	var sqls []string
	record := func(tx *gorm.DB) {
		if tx.Statement.Table == "login_failures" && tx.Error == nil {
			sqls = append(sqls, tx.Dialector.Explain(tx.Statement.SQL.String(), tx.Statement.Vars...))
		}
	}
	if err := db.Callback().Delete().After("gorm:delete").Register("test:record", record); err != nil {
		t.Fatal(err)
	}
	if err := db.Callback().Query().After("gorm:query").Register("test:record", record); err != nil {
		t.Fatal(err)
	}
	for range 12 {
		if err := l.fail(db, "192.0.2.1"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := l.blocked(db, "192.0.2.1"); err != nil {
			t.Fatal(err)
		}
	}
	// The last failure's and check's statements (subqueries are recorded
	// on their own too).
	last := sqls[len(sqls)/12*11:]
	deletes := 0
	for _, sql := range last {
		if strings.HasPrefix(sql, "DELETE") {
			deletes++
		}
		if err := explain(sql); err != nil {
			t.Errorf("%s\nreads all of login_failures: %v", sql, err)
		}
	}
	if deletes == 0 {
		t.Fatalf("no DELETE statement recorded: %q", last)
	}
	// The trim still did its job: the client keeps its last 10, and no
	// more than cap rows remain.
	var n, mine int64
	db.Model(&storage.LoginFailure{}).Count(&n)
	db.Model(&storage.LoginFailure{}).Where("client_key = ?", "192.0.2.1").Count(&mine)
	if n > 3000 || mine != 10 {
		t.Fatalf("%d rows (cap 3000), %d of the client (want 10)", n, mine)
	}
}
