package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
)

// logLines reads the JSON log lines of file.
func logLines(t *testing.T, file string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

func countMsg(lines []map[string]any, msg string) (n int, last map[string]any) {
	for _, l := range lines {
		if l["msg"] == msg {
			n++
			last = l
		}
	}
	return n, last
}

// TestProcessLog: the startup summary names the listeners, the dashboard
// and the store and warns while the admin API is open; every change
// through the API is one line (who, what, the new config version); a
// configuration change does not log Caddy's admin endpoint restart.
func TestProcessLog(t *testing.T) {
	file := filepath.Join(t.TempDir(), "gateway.log")
	g := testgw.Start(t, &testgw.Options{LogFile: file})
	lines := logLines(t, file)
	n, ready := countMsg(lines, "gateway ready")
	admin := strings.TrimPrefix(g.AdminURL, "http://")
	if n != 1 || ready["proxy_http"] != g.ProxyAddr || ready["admin_api"] != admin || ready["dashboard"] != g.AdminURL+"/" ||
		ready["store"] != "sqlite "+g.DSN || ready["config_version"] == nil {
		t.Fatalf("startup summary (%d): %v", n, ready)
	}
	if n, open := countMsg(lines, "the admin API is open: anyone who can reach it can change the gateway; create the first admin user in the dashboard or set an admin token"); n != 1 ||
		open["level"] != "warn" || open["create_admin"] != g.AdminURL+"/#users/new" {
		t.Errorf("open-mode warning (%d): %v", n, open)
	}

	svc := g.Service("logged-svc")
	var cfg map[string]any
	g.JSON("GET", "/api/v1/config", nil, &cfg)
	tok := g.Must("POST", "/api/v1/admin/token", nil)["token"].(string)
	g.Header.Set("Authorization", "Bearer "+tok)
	g.Must("DELETE", fmt.Sprintf("/api/v1/services/%d", svc), nil)
	var after map[string]any
	g.JSON("GET", "/api/v1/config", nil, &after)

	lines = logLines(t, file)
	var changes []string
	for _, l := range lines {
		if l["msg"] == "admin change" {
			changes = append(changes, fmt.Sprintf("%v|%v|%v", l["who"], l["what"], l["config_version"]))
		}
	}
	want := []string{
		fmt.Sprintf("open mode|POST /api/v1/services|%v", cfg["version"]),
		fmt.Sprintf("open mode|POST /api/v1/admin/token|%v", cfg["version"]),
		fmt.Sprintf("admin token|DELETE /api/v1/services/%d|%v", svc, after["version"]),
	}
	if strings.Join(changes, "\n") != strings.Join(want, "\n") {
		t.Errorf("change lines:\n%s\nwant:\n%s", strings.Join(changes, "\n"), strings.Join(want, "\n"))
	}
	// After the startup summary, the changes log no line of Caddy's admin
	// endpoint (it restarts on every load).
	for i, l := range lines {
		if l["msg"] != "gateway ready" {
			continue
		}
		for _, l := range lines[i+1:] {
			if l["logger"] == "admin" {
				t.Errorf("a configuration change logged Caddy's admin endpoint: %v", l)
			}
		}
	}
}
