package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/logger"

	"github.com/caddy-gateway/gateway/internal/pglock"
)

// Store is the gateway's database: SQLite (WAL, foreign keys on) by default,
// PostgreSQL when a DSN is given.
type Store struct {
	DB   *gorm.DB
	Kind string // "sqlite" or "postgres"

	routes   routeCache
	services *rowCache[Service]
	targets  *rowCache[Target]
	tables   []OwnedTable     // tables other packages own (AddTable)
	loaders  []SnapshotLoader // other packages' snapshot loaders (AddSnapshotLoader)
}

// models lists every table of this package the store migrates; the
// package's files add theirs beside their models (registerModels, from
// init). Tables of other packages are added to a store explicitly
// (AddTable).
var models = []any{
	&Settings{}, &Service{}, &Target{}, &Route{}, &StreamRoute{},
	&Plugin{}, &Consumer{}, &Credential{},
}

// registerModels adds tables to migrate. Call from init only.
func registerModels(m ...any) { models = append(models, m...) }

// Open opens and migrates the store. kind is "sqlite" (dsn: a file path) or
// "postgres" (dsn: a libpq connection string or URL).
func Open(kind, dsn string) (*Store, error) {
	cfg := &gorm.Config{
		Logger:         logger.Default.LogMode(logger.Silent),
		TranslateError: true,
		NowFunc:        func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) },
	}
	var dialector gorm.Dialector
	switch kind {
	case "", "sqlite":
		kind = "sqlite"
		if dir := filepath.Dir(dsn); dir != "" {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, fmt.Errorf("creating database folder: %w", err)
			}
		}
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		dialector = sqlite.Open("file:" + dsn + sep + "_journal_mode=WAL&_foreign_keys=on&_busy_timeout=10000&_txlock=immediate")
	case "postgres":
		dialector = postgres.Open(dsn)
	default:
		return nil, fmt.Errorf("unknown database kind %q (want sqlite or postgres)", kind)
	}
	db, err := gorm.Open(dialector, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening %s database: %w", kind, err)
	}
	if kind == "sqlite" {
		sqlDB, err := db.DB()
		if err != nil {
			return nil, err
		}
		// One writer at a time is SQLite's rule anyway; a single connection
		// also keeps :memory: databases whole.
		sqlDB.SetMaxOpenConns(1)
	}
	s := &Store{DB: db, Kind: kind,
		services: newRowCache("services", func(r *Service) int64 { return r.ID }, func(r *Service) time.Time { return r.UpdatedAt }),
		targets:  newRowCache("targets", func(r *Target) int64 { return r.ID }, func(r *Target) time.Time { return r.UpdatedAt }),
	}
	err = s.routes.track(db)
	if err == nil {
		err = s.services.track(db)
	}
	if err == nil {
		err = s.targets.track(db)
	}
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("registering store callbacks: %w", err)
	}
	if err := s.Migrate(func(tx *gorm.DB) error { return tx.AutoMigrate(models...) }); err != nil {
		s.Close()
		return nil, fmt.Errorf("migrating %s database: %w", kind, err)
	}
	return s, nil
}

// Migrate runs fn, which creates or alters tables, on the store. On
// PostgreSQL it runs in one transaction under pglock.Schema: nodes of a
// cluster starting at once on a new or upgraded store each found a table
// or column missing and created it, and all but one failed to start
// ("relation already exists", or a duplicate key in pg_type); under the
// lock the next one finds the work done. PostgreSQL's DDL is
// transactional, so a migration that fails changes nothing.
func (s *Store) Migrate(fn func(tx *gorm.DB) error) error {
	if s.Kind != "postgres" {
		return fn(s.DB)
	}
	return s.DB.Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec(pglock.Schema).Error; err != nil {
			return fmt.Errorf("waiting for the schema lock: %w", err)
		}
		return fn(tx)
	})
}

// Close closes the database.
func (s *Store) Close() error {
	sqlDB, err := s.DB.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// Ping checks the database answers.
func (s *Store) Ping(ctx context.Context) error {
	sqlDB, err := s.DB.DB()
	if err != nil {
		return err
	}
	return sqlDB.PingContext(ctx)
}

// ConsistentRead runs fn in one read-only transaction that sees a single
// state of the store, whatever commits meanwhile (this node's mutations or
// another node's): on PostgreSQL a repeatable-read transaction, since at
// its default, read committed, each statement sees what was committed when
// it started, so a change committed between two of fn's queries would show
// in the second only. A SQLite transaction always sees one state.
func (s *Store) ConsistentRead(ctx context.Context, fn func(tx *gorm.DB) error) error {
	var opts []*sql.TxOptions
	if s.Kind == "postgres" {
		opts = append(opts, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	}
	return s.DB.WithContext(ctx).Transaction(fn, opts...)
}

// SeedSettings creates the settings row from seed when the store has none
// (values from the Caddyfile seed a fresh store; afterwards the row is the
// source of truth). Of nodes seeding a new store at once, the first
// insert wins and the others keep it.
func (s *Store) SeedSettings(seed Settings) error {
	var n int64
	if err := s.DB.Model(&Settings{}).Count(&n).Error; err != nil {
		return fmt.Errorf("reading settings: %w", err)
	}
	if n > 0 {
		return nil
	}
	seed.ID = 1
	return s.DB.Clauses(clause.OnConflict{DoNothing: true}).Create(&seed).Error
}

// ErrNotFound is returned for a missing row.
var ErrNotFound = gorm.ErrRecordNotFound

// IsNotFound reports a missing row.
func IsNotFound(err error) bool { return errors.Is(err, gorm.ErrRecordNotFound) }

// IsConflict reports a unique-constraint violation.
func IsConflict(err error) bool { return errors.Is(err, gorm.ErrDuplicatedKey) }

// IsForeignKey reports a foreign-key violation.
func IsForeignKey(err error) bool { return errors.Is(err, gorm.ErrForeignKeyViolated) }

// Snapshot is the whole routing configuration as one transaction sees it:
// what the config compiler turns into Caddy JSON.
type Snapshot struct {
	Settings Settings
	Services []Service
	Targets  []Target
	// Routes are every route in id order when RouteChanges is nil; a
	// snapshot with changes leaves them unread (AllRoutes reads them).
	Routes []Route
	// RouteChanges are the routes changed since the previous LoadSnapshot,
	// or nil when the store cannot tell (the first snapshot): then Routes
	// holds every route, each to be treated as new.
	RouteChanges *RouteChanges
	StreamRoutes []StreamRoute
	Plugins      []Plugin
	Consumers    []Consumer
	Credentials  []Credential
	// Extra holds rows of other resources (owned tables, ACME and cluster
	// state …), loaded by the store's owned tables (Table.Rows) and its
	// snapshot loaders.
	Extra map[string]any
	sizes map[string]int // rows of each owned table (TableSizes)

	db         *gorm.DB // the transaction it was read in (AllRoutes)
	routeCount int
	counted    bool
}

// RouteCount is the number of routes.
func (s *Snapshot) RouteCount() int {
	if s.counted {
		return s.routeCount
	}
	return len(s.Routes)
}

// AllRoutes returns every route in id order, reading them when the
// snapshot holds only the changes.
func (s *Snapshot) AllRoutes() ([]Route, error) {
	if s.RouteChanges == nil || s.db == nil {
		return s.Routes, nil
	}
	if s.Routes == nil {
		if err := s.db.Order("id").Find(&s.Routes).Error; err != nil {
			return nil, fmt.Errorf("reading routes: %w", err)
		}
	}
	return s.Routes, nil
}

// RolledBack tells the store that the transaction of the last
// LoadSnapshot did not commit: the rows it read are read again next time.
func (s *Store) RolledBack() { s.routes.rolledBack() }

// VerifyRoutes makes the next LoadSnapshot compare every route with the
// database (after writes this process did not make, such as another
// node's). The services and targets caches need no telling: they compare
// every row's updated_at with the database on each snapshot (rowcache.go).
func (s *Store) VerifyRoutes() { s.routes.verify() }

// SnapshotLoader loads one kind of extra rows into a snapshot.
type SnapshotLoader func(db *gorm.DB, snap *Snapshot) error

// snapshotLoaders are this package's own loaders, which every store runs.
var snapshotLoaders []SnapshotLoader

// registerSnapshotLoader adds a loader of this package. Call from init only.
func registerSnapshotLoader(l SnapshotLoader) { snapshotLoaders = append(snapshotLoaders, l) }

// AddSnapshotLoader makes every later snapshot of this store run l, after
// the owned tables are loaded (a feature's loader: the wasm modules' bytes
// for the plugin runtime). The owner calls it once, after Open, before the
// store is shared (the app's feature list does).
func (s *Store) AddSnapshotLoader(l SnapshotLoader) { s.loaders = append(s.loaders, l) }

// LoadSnapshot reads everything the compiler needs, in id order. Routes,
// the table that grows largest, come through the store's route cache: only
// the rows written since the last snapshot are read again (routecache.go).
func (s *Store) LoadSnapshot(db *gorm.DB) (*Snapshot, error) {
	snap := &Snapshot{Extra: map[string]any{}}
	if err := db.First(&snap.Settings, 1).Error; err != nil {
		return nil, fmt.Errorf("reading settings: %w", err)
	}
	routes, changes, n, err := s.routes.load(db)
	if err != nil {
		s.routes.verify()
		return nil, fmt.Errorf("reading routes: %w", err)
	}
	snap.Routes, snap.RouteChanges = routes, changes
	snap.db, snap.routeCount, snap.counted = db, n, true
	if snap.Services, err = s.services.load(db); err != nil {
		return nil, err
	}
	if snap.Targets, err = s.targets.load(db); err != nil {
		return nil, err
	}
	for _, q := range []struct {
		name string
		dst  any
	}{
		{"stream routes", &snap.StreamRoutes}, {"plugins", &snap.Plugins},
		{"consumers", &snap.Consumers}, {"credentials", &snap.Credentials},
	} {
		if err := db.Order("id").Find(q.dst).Error; err != nil {
			return nil, fmt.Errorf("reading %s: %w", q.name, err)
		}
	}
	for _, t := range s.tables {
		if err := t.load(db, snap); err != nil {
			return nil, err
		}
	}
	for _, loaders := range [][]SnapshotLoader{snapshotLoaders, s.loaders} {
		for _, l := range loaders {
			if err := l(db, snap); err != nil {
				return nil, err
			}
		}
	}
	return snap, nil
}
