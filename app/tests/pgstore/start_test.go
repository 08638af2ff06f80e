package pgstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-gateway/gateway/app/certs"
	"github.com/caddy-gateway/gateway/app/wasmapi"
	"github.com/caddy-gateway/gateway/internal/pgtest"
	"github.com/caddy-gateway/gateway/modules/pgstorage"
	"github.com/caddy-gateway/gateway/storage"
)

// TestNodesStartTogetherOnNewStore: the nodes of a cluster started at once
// on a new database (a deployment of several replicas) all open the store:
// its tables, the settings row, the feature tables and the certificate
// storage's tables. Each node found the tables missing and created them,
// and all but one failed to start ("relation already exists", or a
// duplicate key in pg_type).
func TestNodesStartTogetherOnNewStore(t *testing.T) {
	pg := pgtest.Start(t)
	admin, err := storage.Open("postgres", pg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	const rounds, nodes = 3, 8
	for round := 0; round < rounds; round++ {
		name := fmt.Sprintf("fresh%d", round)
		if err := admin.DB.Exec("CREATE DATABASE " + name).Error; err != nil {
			t.Fatal(err)
		}
		dsn := strings.Replace(pg.DSN, "dbname=postgres", "dbname="+name, 1)
		var wg sync.WaitGroup
		errs := make(chan error, nodes)
		start := make(chan struct{})
		for i := 0; i < nodes; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs <- openAsANode(dsn)
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("round %d: a node starting with %d others on a new store: %v", round, nodes-1, err)
			}
		}
	}
}

// openAsANode does what a node's start does to the store before its first
// load: open and migrate it, seed the settings, add the features' tables,
// create the certificate storage's tables.
func openAsANode(dsn string) error {
	s, err := storage.Open("postgres", dsn)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.SeedSettings(*storage.NewSettings(":8080", ":8443")); err != nil {
		return fmt.Errorf("seeding settings: %w", err)
	}
	for _, tb := range []storage.OwnedTable{certs.Table, wasmapi.Table} {
		if err := s.AddTable(tb); err != nil {
			return err
		}
	}
	db, err := s.DB.DB()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return pgstorage.Use(ctx, db)
}
