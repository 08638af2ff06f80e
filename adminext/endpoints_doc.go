package adminext

import "sort"

// DeclaredEndpoints lists every endpoint the features declared (as a running
// API serves them, by path), without a control plane: for generated
// documentation (docs/gen writes docs/endpoints.md from it).
func DeclaredEndpoints() []*Endpoint {
	var eps []*Endpoint
	for _, set := range endpointSets {
		eps = append(eps, set()...)
	}
	sort.SliceStable(eps, func(i, j int) bool { return eps[i].Path < eps[j].Path })
	return eps
}
