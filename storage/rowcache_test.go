package storage

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"gorm.io/gorm"
)

// servicesMatchDB loads a snapshot and checks its services and targets
// against a plain read of the tables.
func servicesMatchDB(t *testing.T, s *Store, db *gorm.DB) *Snapshot {
	t.Helper()
	snap, err := s.LoadSnapshot(db)
	if err != nil {
		t.Fatal(err)
	}
	var svcs []Service
	var tgs []Target
	if err := db.Order("id").Find(&svcs).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Order("id").Find(&tgs).Error; err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(snap.Services), fmt.Sprint(svcs); got != want {
		t.Fatalf("snapshot services\n%s\ntable\n%s", got, want)
	}
	if got, want := fmt.Sprint(snap.Targets), fmt.Sprint(tgs); got != want {
		t.Fatalf("snapshot targets\n%s\ntable\n%s", got, want)
	}
	return snap
}

// The snapshot's services and targets are the tables' rows after every
// kind of write: updates, inserts, deletes (by cascade too), a transaction
// that rolled back after a snapshot read its rows, and writes through
// another connection (another node) that this store never saw.
func TestServiceAndTargetCacheFollowsTheTables(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gw.db")
	s, err := Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.SeedSettings(Settings{HTTPListen: ":0", HTTPSListen: ":0"}); err != nil {
		t.Fatal(err)
	}
	svcs := []Service{{Name: "a", Protocol: "http"}, {Name: "b", Protocol: "http"}, {Name: "c", Protocol: "http"}}
	if err := s.DB.Create(&svcs).Error; err != nil {
		t.Fatal(err)
	}
	tgs := []Target{{ServiceID: svcs[0].ID, Host: "h", Port: 1}, {ServiceID: svcs[1].ID, Host: "h", Port: 2}, {ServiceID: svcs[2].ID, Host: "h", Port: 3}}
	if err := s.DB.Create(&tgs).Error; err != nil {
		t.Fatal(err)
	}
	servicesMatchDB(t, s, s.DB)

	// An update and a new row.
	svcs[1].Retries = 7
	if err := s.DB.Save(&svcs[1]).Error; err != nil {
		t.Fatal(err)
	}
	if err := s.DB.Create(&Target{ServiceID: svcs[1].ID, Host: "h", Port: 4}).Error; err != nil {
		t.Fatal(err)
	}
	if snap := servicesMatchDB(t, s, s.DB); snap.Services[1].Retries != 7 || len(snap.Targets) != 4 {
		t.Fatalf("update not seen: %+v", snap.Services[1])
	}

	// A transaction that read its own write, then rolled back.
	rollback := errors.New("rollback")
	err = s.DB.Transaction(func(tx *gorm.DB) error {
		if err := tx.Model(&svcs[0]).Update("lb_algorithm", "random").Error; err != nil {
			return err
		}
		if snap := servicesMatchDB(t, s, tx); snap.Services[0].LBAlgorithm != "random" {
			t.Fatalf("the transaction's write is not in its snapshot: %+v", snap.Services[0])
		}
		return rollback
	})
	if !errors.Is(err, rollback) {
		t.Fatal(err)
	}
	if snap := servicesMatchDB(t, s, s.DB); snap.Services[0].LBAlgorithm == "random" {
		t.Fatal("a rolled-back write is still in the snapshot")
	}

	// Another node's writes: a second connection the store never saw.
	other, err := Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.DB.Model(&Target{}).Where("id = ?", tgs[2].ID).Updates(map[string]any{"port": 9, "weight": 3}).Error; err != nil {
		t.Fatal(err)
	}
	if snap := servicesMatchDB(t, s, s.DB); snap.Targets[2].Port != 9 {
		t.Fatalf("another connection's write not seen: %+v", snap.Targets[2])
	}
	// Raw SQL: through this store it is seen at once (even when it leaves
	// updated_at alone); through another connection when it sets
	// updated_at, as every writer must (rowCache), with no call telling
	// the store about it.
	if err := s.DB.Exec("UPDATE targets SET port = 10 WHERE id = ?", tgs[2].ID).Error; err != nil {
		t.Fatal(err)
	}
	if snap := servicesMatchDB(t, s, s.DB); snap.Targets[2].Port != 10 {
		t.Fatalf("raw SQL through the store not seen: %+v", snap.Targets[2])
	}
	if err := other.DB.Exec("UPDATE services SET retries = 5, updated_at = ? WHERE id = ?", time.Now().UTC(), svcs[0].ID).Error; err != nil {
		t.Fatal(err)
	}
	if snap := servicesMatchDB(t, s, s.DB); snap.Services[0].Retries != 5 {
		t.Fatalf("another connection's raw SQL not seen: %+v", snap.Services[0])
	}
	// Another node deletes a target and inserts one with the same id.
	if err := other.DB.Exec("DELETE FROM targets WHERE id = ?", tgs[1].ID).Error; err != nil {
		t.Fatal(err)
	}
	if err := other.DB.Create(&Target{ID: tgs[1].ID, ServiceID: svcs[1].ID, Host: "h2", Port: 11}).Error; err != nil {
		t.Fatal(err)
	}
	if snap := servicesMatchDB(t, s, s.DB); snap.Targets[1].Host != "h2" {
		t.Fatalf("another connection's re-insert not seen: %+v", snap.Targets[1])
	}

	// Deletes: a service (its targets by cascade) and a target.
	if err := s.DB.Delete(&Service{}, svcs[2].ID).Error; err != nil {
		t.Fatal(err)
	}
	if err := s.DB.Delete(&Target{}, tgs[0].ID).Error; err != nil {
		t.Fatal(err)
	}
	if snap := servicesMatchDB(t, s, s.DB); len(snap.Services) != 2 || len(snap.Targets) != 2 {
		t.Fatalf("deletes not seen: %d services, %d targets", len(snap.Services), len(snap.Targets))
	}

	// The snapshot's slices are its own.
	snap := servicesMatchDB(t, s, s.DB)
	snap.Services[0].Name = "scribbled"
	servicesMatchDB(t, s, s.DB)
}
