package domain_test

import (
	"path/filepath"
	"testing"

	"github.com/caddy-gateway/gateway/app/domain"
	"github.com/caddy-gateway/gateway/storage"
)

// Deleting a service takes its targets, routes (with their plugins),
// stream routes and plugins by the foreign keys alone; RemoveSplitsTo
// drops the split entries other routes had to it. A consumer takes its
// credentials and a user its sessions the same way. Real SQLite.
func TestDeletesCascadeByForeignKeys(t *testing.T) {
	st, err := storage.Open("sqlite", filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	db := st.DB
	gone, kept := storage.Service{Name: "gone"}, storage.Service{Name: "kept"}
	must(t, db.Create(&gone).Error, db.Create(&kept).Error)
	own := storage.Route{Name: "own", ServiceID: gone.ID}
	splitting := storage.Route{Name: "splitting", ServiceID: kept.ID,
		Splits: []storage.RouteSplit{{ServiceID: gone.ID, Weight: 1}, {ServiceID: kept.ID, Weight: 2}}}
	must(t, db.Create(&storage.Target{ServiceID: gone.ID, Host: "127.0.0.1", Port: 1}).Error,
		db.Create(&own).Error, db.Create(&splitting).Error,
		db.Create(&storage.StreamRoute{Name: "s", ListenAddr: "127.0.0.1:1", ServiceID: gone.ID}).Error,
		db.Create(&storage.Plugin{Type: "cors", Scope: "service", ServiceID: &gone.ID}).Error,
		db.Create(&storage.Plugin{Type: "cors", Scope: "route", RouteID: &own.ID}).Error,
		db.Create(&storage.Plugin{Type: "cors", Scope: "route", RouteID: &splitting.ID}).Error)

	must(t, domain.RemoveSplitsTo(db, gone.ID), db.Delete(&storage.Service{}, gone.ID).Error)

	for _, c := range []struct {
		model any
		want  int64
	}{{&storage.Target{}, 0}, {&storage.Route{}, 1}, {&storage.StreamRoute{}, 0}, {&storage.Plugin{}, 1}} {
		var n int64
		must(t, db.Model(c.model).Count(&n).Error)
		if n != c.want {
			t.Errorf("%T: %d rows left, want %d", c.model, n, c.want)
		}
	}
	var r storage.Route
	must(t, db.First(&r, splitting.ID).Error)
	if len(r.Splits) != 1 || r.Splits[0].ServiceID != kept.ID {
		t.Errorf("splits after the delete: %+v", r.Splits)
	}

	cons := storage.Consumer{Username: "c"}
	must(t, db.Create(&cons).Error)
	must(t, db.Create(&storage.Credential{ConsumerID: cons.ID, Type: "key-auth"}).Error)
	must(t, db.Delete(&storage.Consumer{}, cons.ID).Error)
	var n int64
	must(t, db.Model(&storage.Credential{}).Count(&n).Error)
	if n != 0 {
		t.Errorf("%d credentials outlived their consumer", n)
	}
}

func must(t *testing.T, errs ...error) {
	t.Helper()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
