package api

import (
	"fmt"
	"reflect"
	"strconv"
	"time"

	"gorm.io/gorm"

	"github.com/caddy-gateway/gateway/storage"
)

// Resource is the CRUD of one stored resource type T (a storage model that
// is also its declaration). Hooks add what differs between resources.
type Resource[T any] struct {
	Kind string // singular name for messages, e.g. "service"
	// Check validates references inside the transaction (400 on failure).
	Check func(tx *gorm.DB, v *T) error
	// Cascade removes, before the row goes, what depends on it and no
	// foreign key reaches (the foreign keys' ON DELETE CASCADE does the
	// rest; package domain).
	Cascade func(tx *gorm.DB, id int64) error
	// View shapes answers (nil: the row itself).
	View func(v *T) any
	// ReadView, when set, shapes the answers of GET (list and item) for
	// the caller instead of View: e.g. secrets redacted for viewers.
	ReadView func(c *Call, v *T) any
	// Order is the list order (default "id").
	Order string
}

func (res Resource[T]) answer(v *T) any {
	if res.View != nil {
		return res.View(v)
	}
	return v
}

func (res Resource[T]) readAnswer(c *Call, v *T) any {
	if res.ReadView != nil {
		return res.ReadView(c, v)
	}
	return res.answer(v)
}

// PageQuery declares the optional window of a list (Resource.List). The
// specification's lists answer every item; at tens of thousands of
// routes that is megabytes and a second of work per call, so a client
// (the dashboard among them) may ask for a page, as Kong's size/offset
// and APISIX's page/page_size let it. The answer stays an array.
var PageQuery = []QueryParam{
	{Name: "limit", Type: "integer", Description: "At most this many items (an integer, 0 or more). With limit or offset the answer carries X-Total-Count, the number of items in all. Without either, every item."},
	{Name: "offset", Type: "integer", Description: "Skip this many items first (an integer, 0 or more), in the list's order."},
}

// TotalCountHeader is the answer header of a paged list: the number of
// items in all.
const TotalCountHeader = "X-Total-Count"

// page reads the list window of PageQuery: paged is false when the call
// names neither parameter.
func page(c *Call) (limit, offset int, paged bool, err error) {
	q := c.R.URL.Query()
	limit = -1
	for _, p := range []struct {
		name string
		dst  *int
	}{{"limit", &limit}, {"offset", &offset}} {
		s, ok := q[p.name]
		if !ok {
			continue
		}
		paged = true
		n, err := strconv.Atoi(s[0])
		if err != nil || n < 0 || len(s) > 1 {
			return 0, 0, false, BadRequest(p.name + ": must be one integer, 0 or more")
		}
		*p.dst = n
	}
	return limit, offset, paged, nil
}

func (res Resource[T]) List(c *Call) (any, error) {
	limit, offset, paged, err := page(c)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0)
	order := res.Order
	if order == "" {
		order = "id"
	}
	db := c.CP.Store().DB.WithContext(c.Ctx())
	if paged {
		var total int64
		if err = db.Model(new(T)).Count(&total).Error; err == nil {
			c.W.Header().Set(TotalCountHeader, strconv.FormatInt(total, 10))
			err = db.Order(order).Limit(limit).Offset(offset).Find(&out).Error
		}
	} else {
		err = db.Order(order).Find(&out).Error
	}
	if err != nil {
		return nil, fmt.Errorf("listing %ss: %w", res.Kind, err)
	}
	if res.View == nil && res.ReadView == nil {
		return out, nil
	}
	views := make([]any, len(out))
	for i := range out {
		views[i] = res.readAnswer(c, &out[i])
	}
	return views, nil
}

func (res Resource[T]) Get(c *Call) (any, error) {
	v, err := res.Item(c)
	if err != nil {
		return nil, err
	}
	return res.readAnswer(c, v), nil
}

// Item loads the row the path's {id} names (404 when there is none).
func (res Resource[T]) Item(c *Call) (*T, error) {
	id, err := c.ID("id")
	if err != nil {
		return nil, err
	}
	return res.Load(c.CP.Store().DB.WithContext(c.Ctx()), id)
}

func (res Resource[T]) Load(db *gorm.DB, id int64) (*T, error) {
	v := new(T)
	if err := db.First(v, id).Error; err != nil {
		if storage.IsNotFound(err) {
			return nil, NotFound(fmt.Sprintf("%s %d not found", res.Kind, id))
		}
		return nil, fmt.Errorf("reading %s %d: %w", res.Kind, id, err)
	}
	return v, nil
}

// Create decodes, validates and stores a new row; prepare may set fields
// the path decides (e.g. a target's service_id).
func (res Resource[T]) Create(c *Call, prepare func(v *T) error) (any, error) {
	v := new(T)
	if err := c.Decode(v); err != nil {
		return nil, err
	}
	if prepare != nil {
		if err := prepare(v); err != nil {
			return nil, err
		}
	}
	if err := Write(c, v, res.Check, (*gorm.DB).Create); err != nil {
		return nil, err
	}
	return res.answer(v), nil
}

// Replace is PUT: a full replacement; omitted fields are reset to defaults.
// A PUT to a resource that does not exist is 404 whatever its body (as for
// users), so the existence check comes before the body's validation.
func (res Resource[T]) Replace(c *Call, prepare func(old, v *T) error) (any, error) {
	id, err := c.ID("id")
	if err != nil {
		return nil, err
	}
	if _, err := res.Load(c.CP.Store().DB.WithContext(c.Ctx()), id); err != nil {
		return nil, err
	}
	v := new(T)
	if err := c.Decode(v); err != nil {
		return nil, err
	}
	err = Write(c, v, func(tx *gorm.DB, v *T) error {
		old, err := res.Load(tx, id)
		if err != nil {
			return err
		}
		keepIdentity(old, v)
		if prepare != nil {
			if err := prepare(old, v); err != nil {
				return err
			}
		}
		if res.Check == nil {
			return nil
		}
		return res.Check(tx, v)
	}, (*gorm.DB).Save)
	if err != nil {
		return nil, err
	}
	return res.answer(v), nil
}

func (res Resource[T]) Remove(c *Call) (any, error) {
	id, err := c.ID("id")
	if err != nil {
		return nil, err
	}
	err = c.CP.Mutate(c.Ctx(), func(tx *gorm.DB) error {
		if _, err := res.Load(tx, id); err != nil {
			return err
		}
		if res.Cascade != nil {
			if err := res.Cascade(tx, id); err != nil {
				return err
			}
		}
		return tx.Delete(new(T), id).Error
	})
	if err != nil {
		return nil, err
	}
	return deleted{Deleted: true}, nil
}

// keepIdentity copies the row's id and creation time onto its replacement.
func keepIdentity[T any](old, v *T) {
	ov, nv := reflect.ValueOf(old).Elem(), reflect.ValueOf(v).Elem()
	for _, name := range []string{"ID", "CreatedAt"} {
		if f := nv.FieldByName(name); f.IsValid() && f.CanSet() {
			f.Set(ov.FieldByName(name))
		}
	}
	if f := nv.FieldByName("UpdatedAt"); f.IsValid() && f.CanSet() {
		f.Set(reflect.ValueOf(time.Time{}))
	}
}

// Write stores v in one mutation: check (nil: none) validates it inside the
// transaction, then write ((*gorm.DB).Create or (*gorm.DB).Save) writes
// it. On any failure the store and the running configuration stay as they
// were.
func Write[T any](c *Call, v *T, check func(tx *gorm.DB, v *T) error, write func(tx *gorm.DB, v any) *gorm.DB) error {
	return c.CP.Mutate(c.Ctx(), func(tx *gorm.DB) error {
		if check != nil {
			if err := check(tx, v); err != nil {
				return err
			}
		}
		return write(tx, v).Error
	})
}

// Exists checks a referenced row (400 naming the field when missing).
func Exists[T any](tx *gorm.DB, field string, id int64) error {
	var n int64
	if err := tx.Model(new(T)).Where("id = ?", id).Count(&n).Error; err != nil {
		return err
	}
	if n == 0 {
		return BadRequest(fmt.Sprintf("%s: %d does not exist", field, id))
	}
	return nil
}

// CRUD declares the five standard endpoints of a resource under base.
func (res Resource[T]) CRUD(base, tag string, readRole, writeRole Role, decl any) []*Endpoint {
	item := base + "/{id}"
	return []*Endpoint{
		{Method: "GET", Path: base, Role: readRole, Tag: tag, Summary: "List " + res.Kind + "s", Response: decl, ResponseList: true, Query: PageQuery, Statuses: []int{400}, Handle: res.List},
		{Method: "POST", Path: base, Role: writeRole, Tag: tag, Summary: "Create a " + res.Kind, Body: decl, Response: decl, Statuses: []int{400},
			Handle: func(c *Call) (any, error) { return res.Create(c, nil) }},
		{Method: "GET", Path: item, Role: readRole, Tag: tag, Summary: "Get a " + res.Kind, Response: decl, Statuses: []int{404}, Handle: res.Get},
		{Method: "PUT", Path: item, Role: writeRole, Tag: tag, Summary: "Replace a " + res.Kind + " (full replacement: omitted fields get their defaults)", Body: decl, Response: decl, Statuses: []int{400, 404},
			Handle: func(c *Call) (any, error) { return res.Replace(c, nil) }},
		{Method: "DELETE", Path: item, Role: writeRole, Tag: tag, Summary: "Delete a " + res.Kind, Response: deleted{}, Statuses: []int{404}, Handle: res.Remove},
	}
}
