package storage

import (
	"sync"
	"time"

	"gorm.io/gorm"
)

// routeCache keeps the rows of the routes table between snapshots, so a
// mutation with 10,000 routes reads 10,000 (id, updated_at) pairs and the
// changed rows, not every row. Every write to routes goes through GORM's
// model methods, which set updated_at; a row whose stamp differs from the
// cached one (or that is new) is read again. A rolled-back write leaves a
// stale entry at worst, which the next differing stamp replaces or the
// next missing id drops.
type routeCache struct {
	mu   sync.Mutex
	rows map[int64]Route
}

type routeStamp struct {
	ID        int64
	UpdatedAt time.Time
}

func (c *routeCache) load(db *gorm.DB) ([]Route, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var stamps []routeStamp
	if err := db.Model(&Route{}).Select("id, updated_at").Order("id").Scan(&stamps).Error; err != nil {
		return nil, err
	}
	if c.rows == nil {
		c.rows = map[int64]Route{}
	}
	var stale []int64
	for _, st := range stamps {
		if r, ok := c.rows[st.ID]; !ok || !r.UpdatedAt.Equal(st.UpdatedAt) {
			stale = append(stale, st.ID)
		}
	}
	for i := 0; i < len(stale); i += 500 {
		end := min(i+500, len(stale))
		var fresh []Route
		if err := db.Where("id IN ?", stale[i:end]).Find(&fresh).Error; err != nil {
			return nil, err
		}
		for _, r := range fresh {
			c.rows[r.ID] = r
		}
	}
	out := make([]Route, 0, len(stamps))
	keep := make(map[int64]Route, len(stamps))
	for _, st := range stamps {
		if r, ok := c.rows[st.ID]; ok {
			out = append(out, r)
			keep[st.ID] = r
		}
	}
	c.rows = keep
	return out, nil
}
