package storage

import (
	"cmp"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"
)

// rowCache keeps the rows of one table (services, targets) between
// snapshots with their updated_at stamps. Each snapshot reads every row's
// (id, updated_at) with database/sql and reads in full only the rows
// whose stamp is new or changed: at 5,000 services and 10,000 targets
// GORM's reading of every row cost more than the rest of a change.
//
// Stamps decide, by equality (not order): a transaction that rolled back
// after this cache read its rows (the database's stamp is then the old
// one again, which differs from the cached), a restore, a cascade, and
// another node's writes, deletes and re-inserts are seen without being
// told, so a reload after another node's change reads only the rows it
// changed. Raw SQL through this store that names the table resets the
// cache (track): the next snapshot reads every row.
//
// The one write this cannot see is one that leaves a row's updated_at as
// it was: GORM's UpdateColumn/UpdateColumns, updates with SkipHooks, or
// raw SQL from another process that does not set updated_at (none exist
// in this tree). A writer of services or targets, on any node or tool,
// must set updated_at to the current time (Save, Updates, Update do; raw
// SQL: SET updated_at = now()), or the gateways sharing the store keep
// serving the row as it was until they restart.
type rowCache[T any] struct {
	table string // table name, for errors
	id    func(*T) int64
	at    func(*T) time.Time

	mu     sync.Mutex
	stamps []routeStamp // in id order
	rows   []T          // rows[i] is the row of stamps[i]
}

func newRowCache[T any](table string, id func(*T) int64, at func(*T) time.Time) *rowCache[T] {
	return &rowCache[T]{table: table, id: id, at: at}
}

// reset makes the next load read every row.
func (c *rowCache[T]) reset() {
	c.mu.Lock()
	c.stamps, c.rows = nil, nil
	c.mu.Unlock()
}

// track resets the cache on raw SQL that names its table.
func (c *rowCache[T]) track(db *gorm.DB) error {
	return db.Callback().Raw().After("gorm:raw").Register("gateway:"+c.table+"_raw", func(db *gorm.DB) {
		if strings.Contains(strings.ToLower(db.Statement.SQL.String()), c.table) {
			c.reset()
		}
	})
}

// load returns every row in id order, as db sees them. The slice is the
// caller's; the rows' pointer fields are shared and must not be written.
func (c *rowCache[T]) load(db *gorm.DB) ([]T, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	stamps, err := readStampsOf(db, new(T))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", c.table, err)
	}
	var stale []int64
	j := 0 // walks c.stamps, also in id order
	for _, st := range stamps {
		for j < len(c.stamps) && c.stamps[j].ID < st.ID {
			j++
		}
		if j >= len(c.stamps) || c.stamps[j] != st {
			stale = append(stale, st.ID)
		}
	}
	fresh, err := readByID[T](db, stale)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", c.table, err)
	}
	slices.SortFunc(fresh, func(a, b T) int { return cmp.Compare(c.id(&a), c.id(&b)) })
	rows := make([]T, 0, len(stamps))
	j, k := 0, 0 // j walks c.stamps, k walks fresh
	for _, st := range stamps {
		for j < len(c.stamps) && c.stamps[j].ID < st.ID {
			j++
		}
		if j < len(c.stamps) && c.stamps[j] == st {
			rows = append(rows, c.rows[j])
			continue
		}
		for k < len(fresh) && c.id(&fresh[k]) < st.ID {
			k++
		}
		if k == len(fresh) || c.id(&fresh[k]) != st.ID {
			// Deleted between the two reads: only possible outside a
			// transaction; read everything again next time.
			c.stamps, c.rows = nil, nil
			return nil, fmt.Errorf("reading %s: row %d changed while being read", c.table, st.ID)
		}
		rows = append(rows, fresh[k])
	}
	// The stamps of the rows as read (a row written between the two reads
	// outside a transaction is read again next time).
	for i := range rows {
		stamps[i].At = c.at(&rows[i]).UnixMicro()
	}
	c.stamps, c.rows = stamps, rows
	return slices.Clone(rows), nil
}

// readStampsOf reads every row's (id, updated_at) of model's table in id
// order with database/sql directly (GORM's reflection costs more than the
// query).
func readStampsOf(db *gorm.DB, model any) ([]routeStamp, error) {
	rows, err := db.Model(model).Select("id, updated_at").Order("id").Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []routeStamp
	for rows.Next() {
		var id int64
		var at sql.NullTime
		if err := rows.Scan(&id, &at); err != nil {
			return nil, err
		}
		out = append(out, routeStamp{id, at.Time.UnixMicro()})
	}
	return out, rows.Err()
}

// readByID reads the rows with the ids, in batches.
func readByID[T any](db *gorm.DB, ids []int64) ([]T, error) {
	out := make([]T, 0, len(ids))
	for i := 0; i < len(ids); i += 500 {
		end := min(i+500, len(ids))
		var fresh []T
		if err := db.Where("id IN ?", ids[i:end]).Find(&fresh).Error; err != nil {
			return nil, err
		}
		out = append(out, fresh...)
	}
	return out, nil
}
