package storage

import (
	"cmp"
	"slices"
	"strings"
	"sync"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// RouteChanges are the routes that changed since the previous snapshot:
// rows written (new or updated, as they are now) and ids no longer in the
// store. The compiler applies them to the routing table it keeps instead
// of building it again from every row.
type RouteChanges struct {
	Upserted []Route
	Removed  []int64
}

// routeCache keeps the id and updated_at of every route between
// snapshots, so that a change at 50,000 routes reads the rows it wrote,
// not every row, and reports them as changes. It keeps stamps, not rows:
// the compiler keeps the routing table itself (it needs the changes, not
// the rows), so the cache costs 16 bytes a route.
//
// Writes are seen through GORM callbacks on the store's handle (every
// session and transaction derived from it): a create, update or delete of
// routes whose ids GORM knows (the model's id, a delete by primary key)
// marks those ids dirty; anything else that may change routes (a bulk
// update or delete by condition, a deleted service whose routes the
// database deletes by cascade, raw SQL naming routes or services) marks
// the whole cache for a full check, which compares every row's updated_at
// with the cached one and reads the rows that differ. Writes by anything
// other than this process (another node on the same PostgreSQL) are not
// seen: VerifyRoutes forces the full check.
type routeCache struct {
	mu sync.Mutex
	// stamps are every route's, sorted by id; valid once every row was
	// read.
	stamps []routeStamp
	valid  bool
	full   bool
	dirty  map[int64]bool
	// applied are the ids the last load read (to be read again if its
	// transaction rolls back).
	applied []int64
}

type routeStamp struct {
	ID int64
	At int64 // updated_at, Unix microseconds (the store's precision)
}

func stampOf(r *Route) routeStamp { return routeStamp{r.ID, r.UpdatedAt.UnixMicro()} }

// track registers the callbacks that see route writes.
func (c *routeCache) track(db *gorm.DB) error {
	cb := db.Callback()
	if err := cb.Create().After("gorm:create").Register("gateway:routes_create", c.written); err != nil {
		return err
	}
	if err := cb.Update().After("gorm:update").Register("gateway:routes_update", c.written); err != nil {
		return err
	}
	if err := cb.Delete().After("gorm:delete").Register("gateway:routes_delete", c.written); err != nil {
		return err
	}
	return cb.Raw().After("gorm:raw").Register("gateway:routes_raw", c.raw)
}

// written is the callback of creates, updates and deletes.
func (c *routeCache) written(db *gorm.DB) {
	st := db.Statement
	switch st.Table {
	case "routes":
	case "services":
		// Deleting a service deletes its routes by cascade.
		if _, isDelete := st.Clauses["DELETE"]; isDelete {
			c.markFull()
		}
		return
	default:
		return
	}
	ids := modelIDs(st)
	if len(ids) == 0 {
		ids = wherePrimaryKeys(st)
	}
	if len(ids) == 0 {
		c.markFull()
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dirty == nil {
		c.dirty = map[int64]bool{}
	}
	for _, id := range ids {
		c.dirty[id] = true
	}
}

// raw is the callback of Exec: SQL that may write routes forces a full
// check.
func (c *routeCache) raw(db *gorm.DB) {
	sqlText := strings.ToLower(db.Statement.SQL.String())
	if strings.Contains(sqlText, "route") || strings.Contains(sqlText, "service") {
		c.markFull()
	}
}

func (c *routeCache) markFull() {
	c.mu.Lock()
	c.full = true
	c.mu.Unlock()
}

// modelIDs are the non-zero ids of the statement's model value (a *Route
// or a slice of them).
func modelIDs(st *gorm.Statement) []int64 {
	rv := st.ReflectValue
	if !rv.IsValid() {
		return nil
	}
	var ids []int64
	add := func(r *Route) bool {
		if r.ID == 0 {
			return false
		}
		ids = append(ids, r.ID)
		return true
	}
	switch v := rv.Interface().(type) {
	case Route:
		if !add(&v) {
			return nil
		}
	case *Route:
		if v == nil || !add(v) {
			return nil
		}
	case []Route:
		for i := range v {
			if !add(&v[i]) {
				return nil
			}
		}
	case []*Route:
		for _, r := range v {
			if r == nil || !add(r) {
				return nil
			}
		}
	}
	return ids
}

// wherePrimaryKeys are the ids of a statement whose only condition is its
// primary key (GORM's Delete(&Route{}, id) form), nil otherwise.
func wherePrimaryKeys(st *gorm.Statement) []int64 {
	c, ok := st.Clauses["WHERE"]
	if !ok {
		return nil
	}
	where, ok := c.Expression.(clause.Where)
	if !ok || len(where.Exprs) != 1 {
		return nil
	}
	var col any
	var values []any
	switch e := where.Exprs[0].(type) {
	case clause.IN:
		col, values = e.Column, e.Values
	case clause.Eq:
		col, values = e.Column, []any{e.Value}
	default:
		return nil
	}
	if cc, ok := col.(clause.Column); !ok || (cc.Name != clause.PrimaryKey && cc.Name != "id") {
		return nil
	}
	ids := make([]int64, 0, len(values))
	for _, v := range values {
		switch n := v.(type) {
		case int64:
			ids = append(ids, n)
		case int:
			ids = append(ids, int64(n))
		default:
			return nil
		}
	}
	return ids
}

// load returns the changes since the previous load, or, when the cache
// cannot tell (the first load), every route in id order with nil changes.
// count is the number of routes.
func (c *routeCache) load(db *gorm.DB) (all []Route, ch *RouteChanges, count int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case !c.valid:
		if err := db.Order("id").Find(&all).Error; err != nil {
			return nil, nil, 0, err
		}
		c.stamps = make([]routeStamp, len(all))
		for i := range all {
			c.stamps[i] = stampOf(&all[i])
		}
		c.valid, c.full, c.dirty, c.applied = true, false, nil, nil
		return all, nil, len(all), nil
	case c.full:
		ch, err = c.check(db)
	default:
		ch, err = c.readDirty(db)
	}
	if err != nil {
		return nil, nil, 0, err
	}
	return nil, ch, len(c.stamps), nil
}

// readDirty reads the rows written since the last load.
func (c *routeCache) readDirty(db *gorm.DB) (*RouteChanges, error) {
	ids := make([]int64, 0, len(c.dirty))
	for id := range c.dirty {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	fresh, err := readByID[Route](db, ids)
	if err != nil {
		return nil, err
	}
	byID := make(map[int64]*Route, len(fresh))
	for i := range fresh {
		byID[fresh[i].ID] = &fresh[i]
	}
	ch := &RouteChanges{}
	for _, id := range ids {
		i, found := c.find(id)
		r, exists := byID[id]
		switch {
		case exists && found:
			c.stamps[i] = stampOf(r)
			ch.Upserted = append(ch.Upserted, *r)
		case exists:
			c.stamps = slices.Insert(c.stamps, i, stampOf(r))
			ch.Upserted = append(ch.Upserted, *r)
		case found:
			c.stamps = slices.Delete(c.stamps, i, i+1)
			ch.Removed = append(ch.Removed, id)
		}
	}
	c.applied, c.dirty = ids, nil
	return ch, nil
}

// check compares every row's stamp with the cache and reads the rows that
// differ (the full check).
func (c *routeCache) check(db *gorm.DB) (*RouteChanges, error) {
	stamps, err := readStampsOf(db, &Route{})
	if err != nil {
		return nil, err
	}
	ch := &RouteChanges{}
	var stale []int64
	j := 0 // walks c.stamps, also in id order
	for _, st := range stamps {
		for ; j < len(c.stamps) && c.stamps[j].ID < st.ID; j++ {
			ch.Removed = append(ch.Removed, c.stamps[j].ID)
		}
		known := j < len(c.stamps) && c.stamps[j].ID == st.ID
		if !known || c.stamps[j] != st || c.dirty[st.ID] {
			stale = append(stale, st.ID)
		}
		if known {
			j++
		}
	}
	for ; j < len(c.stamps); j++ {
		ch.Removed = append(ch.Removed, c.stamps[j].ID)
	}
	if ch.Upserted, err = readByID[Route](db, stale); err != nil {
		return nil, err
	}
	c.stamps, c.full, c.dirty, c.applied = stamps, false, nil, stale
	return ch, nil
}

// rolledBack reads the rows of the last load again next time: its
// transaction did not commit.
func (c *routeCache) rolledBack() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dirty == nil {
		c.dirty = map[int64]bool{}
	}
	for _, id := range c.applied {
		c.dirty[id] = true
	}
	c.applied = nil
}

// verify makes the next load a full check.
func (c *routeCache) verify() { c.markFull() }

func (c *routeCache) find(id int64) (int, bool) {
	return slices.BinarySearchFunc(c.stamps, id, func(st routeStamp, id int64) int { return cmp.Compare(st.ID, id) })
}
