package storage

import (
	"fmt"

	"gorm.io/gorm"
)

// Table is a table another package declares and owns (the certificates of
// app/certs): the store migrates it once the owner adds it with
// Store.AddTable, and every snapshot of that store holds its rows, in id
// order (Rows). The store never needs to know the row type.
type Table[T any] struct {
	name string
	omit []string
}

// NewTable declares a table of T rows: name names it in errors and in the
// snapshot's TableSizes ("certificates"); omit lists columns a snapshot
// leaves out (bulk data).
func NewTable[T any](name string, omit ...string) *Table[T] {
	return &Table[T]{name: name, omit: omit}
}

// Name is the table's name in TableSizes.
func (t *Table[T]) Name() string { return t.name }

// Rows are the table's rows in snap (nil when the snapshot's store does not
// have the table).
func (t *Table[T]) Rows(snap *Snapshot) []T {
	rows, _ := snap.Extra[t.key()].([]T)
	return rows
}

// Put makes rows the table's rows in snap: what loading a snapshot does
// (tests build snapshots with it).
func (t *Table[T]) Put(snap *Snapshot, rows []T) {
	if snap.Extra == nil {
		snap.Extra = map[string]any{}
	}
	if snap.sizes == nil {
		snap.sizes = map[string]int{}
	}
	snap.Extra[t.key()] = rows
	snap.sizes[t.name] = len(rows)
}

func (t *Table[T]) key() string { return "table:" + t.name }

func (t *Table[T]) migrate(db *gorm.DB) error { return db.AutoMigrate(new(T)) }

func (t *Table[T]) load(db *gorm.DB, snap *Snapshot) error {
	var rows []T
	if len(t.omit) > 0 {
		db = db.Omit(t.omit...)
	}
	if err := db.Order("id").Find(&rows).Error; err != nil {
		return fmt.Errorf("reading %s: %w", t.name, err)
	}
	t.Put(snap, rows)
	return nil
}

// OwnedTable is a *Table[T], whatever T is.
type OwnedTable interface {
	Name() string
	migrate(db *gorm.DB) error
	load(db *gorm.DB, snap *Snapshot) error
}

// AddTable migrates t and makes every later snapshot load its rows. The
// table's owner calls it once, after Open, before the store is shared
// (the app's feature list does).
func (s *Store) AddTable(t OwnedTable) error {
	if err := s.Migrate(t.migrate); err != nil {
		return fmt.Errorf("migrating %s: %w", t.Name(), err)
	}
	s.tables = append(s.tables, t)
	return nil
}

// TableSizes are the number of rows of each owned table in the snapshot,
// by table name.
func (s *Snapshot) TableSizes() map[string]int { return s.sizes }
