package storage

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"gorm.io/gorm"
)

func openTestStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open("sqlite", filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.SeedSettings(Settings{HTTPListen: ":0", HTTPSListen: ":0"}); err != nil {
		t.Fatal(err)
	}
	return s
}

// snapshotMatchesDB loads a snapshot and checks its routes against a plain
// read of the table; it returns the snapshot's changes.
func snapshotMatchesDB(t *testing.T, s *Store) *RouteChanges {
	t.Helper()
	snap, err := s.LoadSnapshot(s.DB)
	if err != nil {
		t.Fatal(err)
	}
	all, err := snap.AllRoutes()
	if err != nil {
		t.Fatal(err)
	}
	if snap.RouteCount() != len(all) {
		t.Fatalf("RouteCount %d, %d routes", snap.RouteCount(), len(all))
	}
	var want []Route
	if err := s.DB.Order("id").Find(&want).Error; err != nil {
		t.Fatal(err)
	}
	if len(all) != len(want) {
		t.Fatalf("snapshot has %d routes, the table %d", len(all), len(want))
	}
	for i := range want {
		g, w := all[i], want[i]
		if g.ID != w.ID || g.Name != w.Name || g.Priority != w.Priority || !slices.Equal(g.Paths, w.Paths) || g.ServiceID != w.ServiceID {
			t.Fatalf("route %d: snapshot %+v, table %+v", i, g, w)
		}
	}
	return snap.RouteChanges
}

func changedIDs(ch *RouteChanges) (up, rm []int64) {
	for _, r := range ch.Upserted {
		up = append(up, r.ID)
	}
	return up, ch.Removed
}

// The route cache follows every kind of write: creates, updates and deletes
// by id are read back as changes of those rows only; a bulk write by
// condition, a service deleted with its routes by cascade and a rolled
// back transaction are caught too.
func TestRouteCacheFollowsWrites(t *testing.T) {
	s := openTestStore(t)
	svc := Service{Name: "s"}
	svc.SetDefaults()
	if err := s.DB.Create(&svc).Error; err != nil {
		t.Fatal(err)
	}
	newRoute := func(name string) Route {
		r := Route{Name: name, ServiceID: svc.ID}
		r.SetDefaults()
		r.Paths = []string{"/" + name}
		return r
	}
	var routes []Route
	for _, n := range []string{"a", "b", "c", "d"} {
		routes = append(routes, newRoute(n))
	}
	if err := s.DB.Create(&routes).Error; err != nil {
		t.Fatal(err)
	}
	if ch := snapshotMatchesDB(t, s); ch != nil {
		t.Fatalf("first snapshot: changes %+v, want unknown (nil)", ch)
	}
	if ch := snapshotMatchesDB(t, s); ch == nil || len(ch.Upserted)+len(ch.Removed) != 0 {
		t.Fatalf("no writes: changes %+v", ch)
	}

	// Save by id, delete by primary key: exactly those rows.
	routes[1].Priority = 7
	if err := s.DB.Save(&routes[1]).Error; err != nil {
		t.Fatal(err)
	}
	if err := s.DB.Delete(&Route{}, routes[2].ID).Error; err != nil {
		t.Fatal(err)
	}
	e := newRoute("e")
	if err := s.DB.Create(&e).Error; err != nil {
		t.Fatal(err)
	}
	ch := snapshotMatchesDB(t, s)
	up, rm := changedIDs(ch)
	if !slices.Equal(up, []int64{routes[1].ID, e.ID}) || !slices.Equal(rm, []int64{routes[2].ID}) {
		t.Fatalf("changes: upserted %v removed %v", up, rm)
	}

	// A bulk update by condition: the full check finds the rows.
	if err := s.DB.Model(&Route{}).Where("name = ?", "a").Update("priority", 3).Error; err != nil {
		t.Fatal(err)
	}
	if up, _ := changedIDs(snapshotMatchesDB(t, s)); !slices.Contains(up, routes[0].ID) {
		t.Fatalf("a bulk update was missed: upserted %v", up)
	}

	// A rolled back transaction: its rows are read again afterwards.
	err := s.DB.Transaction(func(tx *gorm.DB) error {
		routes[3].Name = "renamed"
		if err := tx.Save(&routes[3]).Error; err != nil {
			return err
		}
		if _, err := s.LoadSnapshot(tx); err != nil {
			return err
		}
		return errors.New("roll back")
	})
	if err == nil {
		t.Fatal("the transaction committed")
	}
	s.RolledBack()
	if up, _ := changedIDs(snapshotMatchesDB(t, s)); !slices.Contains(up, routes[3].ID) {
		t.Fatalf("a rolled back write stayed in the cache: upserted %v", up)
	}

	// Deleting the service deletes its routes by cascade.
	if err := s.DB.Delete(&Service{}, svc.ID).Error; err != nil {
		t.Fatal(err)
	}
	if _, rm := changedIDs(snapshotMatchesDB(t, s)); len(rm) != 4 {
		t.Fatalf("a cascade delete: removed %v, want the 4 routes left", rm)
	}
}
