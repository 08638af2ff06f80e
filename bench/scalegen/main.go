// Command scalegen writes an import document (POST /api/v1/import) with
// the given number of routes for bench/scale.sh: 100 services (-services)
// with one target each (-targets), routes with exact hosts, wildcard hosts, no host, literal
// prefixes and one in ten regex paths, one consumer with a key-auth
// credential and one route-scoped plugin.
//
//	go run ./bench/scalegen -routes 50000 -upstream 127.0.0.1:19101 > doc.json
//
// It is exercised by bench/scale.sh (make bench-scale), not by make test.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
)

func main() {
	routes := flag.Int("routes", 1, "number of routes")
	nsvc := flag.Int("services", 100, "number of services")
	ntargets := flag.Int("targets", 1, "targets per service (ports upstream, upstream+1, ...)")
	upstream := flag.String("upstream", "127.0.0.1:19101", "target of every service")
	flag.Parse()
	host, port, err := net.SplitHostPort(*upstream)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	p, _ := strconv.Atoi(port)

	type target struct {
		Host string `json:"host"`
		Port int    `json:"port"`
	}
	type service struct {
		ID      int64    `json:"id"`
		Name    string   `json:"name"`
		Targets []target `json:"targets"`
	}
	type route struct {
		ID        int64    `json:"id"`
		Name      string   `json:"name"`
		ServiceID int64    `json:"service_id"`
		Hosts     []string `json:"hosts"`
		Paths     []string `json:"paths"`
	}
	doc := map[string]any{"format": "gateway-export", "version": 1}
	var svcs []service
	for i := int64(1); i <= int64(*nsvc); i++ {
		s := service{ID: i, Name: fmt.Sprintf("s%d", i)}
		for t := range *ntargets {
			s.Targets = append(s.Targets, target{host, p + t})
		}
		svcs = append(svcs, s)
	}
	doc["services"] = svcs
	list := make([]route, 0, *routes)
	for i := 0; i < *routes; i++ {
		r := route{ID: int64(i + 1), Name: fmt.Sprintf("r%d", i), ServiceID: int64(i%*nsvc + 1)}
		switch i % 10 {
		case 0, 1, 2, 3:
			r.Hosts, r.Paths = []string{fmt.Sprintf("h%d.example.com", i)}, []string{"/", fmt.Sprintf("/api/%d", i)}
		case 4, 5, 6:
			r.Hosts, r.Paths = []string{fmt.Sprintf("*.w%d.example.com", i)}, []string{"/api"}
		case 7, 8:
			r.Hosts, r.Paths = []string{}, []string{fmt.Sprintf("/p%d", i)}
		case 9:
			r.Hosts, r.Paths = []string{fmt.Sprintf("h%d.example.org", i)}, []string{fmt.Sprintf("~/v%d/[0-9]+", i)}
		}
		list = append(list, r)
	}
	doc["routes"] = list
	doc["consumers"] = []any{map[string]any{"id": 1, "username": "bench", "credentials": []any{
		map[string]any{"type": "key-auth", "key": "bench-key"},
	}}}
	doc["plugins"] = []any{map[string]any{"id": 1, "type": "key-auth", "scope": "route", "route_id": 1, "enabled": true, "config": map[string]any{}}}
	w := bufio.NewWriter(os.Stdout)
	if err := json.NewEncoder(w).Encode(doc); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	w.Flush()
}
