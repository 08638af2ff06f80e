package router

// Route is one compiled HTTP route, as the config compiler writes it into the
// router's JSON. Only enabled routes are compiled. Matching semantics:
// docs/routing.md, implemented in table.go.
type Route struct {
	ID           int64             `json:"id"`
	Name         string            `json:"name,omitempty"`
	ServiceID    int64             `json:"service_id"`
	Priority     int32             `json:"priority,omitempty"`
	Hosts        []string          `json:"hosts,omitempty"`
	Paths        []string          `json:"paths,omitempty"`
	Methods      []string          `json:"methods,omitempty"`
	Headers      map[string]string `json:"headers,omitempty"`
	Splits       []Split           `json:"splits,omitempty"`
	StripPath    bool              `json:"strip_path,omitempty"`
	PreserveHost bool              `json:"preserve_host,omitempty"`
	// Plugins are the ids of the route's effective plugin chain, in the
	// order they run (compiled once per config load).
	Plugins []int64 `json:"plugins,omitempty"`
}

// Split sends a weighted share of a route's traffic to a service.
type Split struct {
	ServiceID int64 `json:"service_id"`
	Weight    int32 `json:"weight"`
}
