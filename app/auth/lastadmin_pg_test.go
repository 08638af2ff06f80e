package auth_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

// TestLastAdminConcurrentDemotion: on PostgreSQL (read committed), two
// transactions demoting the two last admins at once each counted two
// admins and both committed, leaving none. The admin rows are locked
// before they are counted, so one of the two is refused.
func TestLastAdminConcurrentDemotion(t *testing.T) {
	e := &env{t: t, g: testgw.StartOnPostgres(t)}
	adm := e.withToken(e.anon().token())
	a := adm.user("a@example.com", "admin", "a-password")
	b := adm.user("b@example.com", "admin", "b-password")
	email := map[int64]string{a: "a@example.com", b: "b@example.com"}
	for round := 0; round < 20; round++ {
		var wg sync.WaitGroup
		status := make([]int, 2)
		for i, id := range []int64{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				status[i] = adm.do("PUT", fmt.Sprintf("/api/v1/users/%d", id), map[string]any{"email": email[id], "role": "editor"}).Status
			}()
		}
		wg.Wait()
		var users []map[string]any
		adm.want(200, "GET", "/api/v1/users", nil).decode(t, &users)
		admins := 0
		for _, u := range users {
			if u["role"] == "admin" {
				admins++
			}
		}
		if admins != 1 || status[0]+status[1] != 600 {
			t.Fatalf("round %d: concurrent demotions answered %v and left %d admin users, want 200+400 and 1", round, status, admins)
		}
		for _, id := range []int64{a, b} {
			adm.want(200, "PUT", fmt.Sprintf("/api/v1/users/%d", id), map[string]any{"email": email[id], "role": "admin"})
		}
	}
}
