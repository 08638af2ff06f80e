// Package resources is the admin API of the routing resources: services,
// targets, routes, stream routes and the global settings. Rules that span
// resources live in package domain. Its tests are the API tests in
// app/tests (api, input, contract, streams, settings).
package resources

import "github.com/caddy-gateway/gateway/app/api"

// Endpoints are the routing resources' endpoints.
func Endpoints() []*api.Endpoint {
	eps := gatewayEndpoints()
	eps = append(eps, streamEndpoints()...)
	return append(eps, settingsEndpoints()...)
}
