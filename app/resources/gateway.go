package resources

import (
	"gorm.io/gorm"

	"github.com/caddy-gateway/gateway/app/api"
	"github.com/caddy-gateway/gateway/app/domain"
	"github.com/caddy-gateway/gateway/storage"
)

var services = api.Resource[storage.Service]{
	Kind:    "service",
	Cascade: domain.RemoveSplitsTo,
}

var targets = api.Resource[storage.Target]{Kind: "target"}

var routes = api.Resource[storage.Route]{
	Kind:  "route",
	Check: domain.CheckRoute,
}

func gatewayEndpoints() []*api.Endpoint {
	eps := services.CRUD("/api/v1/services", "services", api.RoleViewer, api.RoleEditor, storage.Service{})
	eps[len(eps)-1].Summary = "Delete a service and its targets, routes, stream routes and plugins"
	eps[len(eps)-1].Description = "Routes of other services that split traffic to the deleted service lose that split entry; a route left with no split entries sends all its traffic to its own service_id."
	eps = append(eps, routes.CRUD("/api/v1/routes", "routes", api.RoleViewer, api.RoleEditor, storage.Route{})...)
	eps = append(eps,
		&api.Endpoint{Method: "GET", Path: "/api/v1/services/{service_id}/targets", Role: api.RoleViewer, Tag: "targets",
			Summary: "List a service's targets (an empty array when the service does not exist)", Response: storage.Target{}, ResponseList: true,
			Handle: listTargets},
		&api.Endpoint{Method: "POST", Path: "/api/v1/services/{service_id}/targets", Role: api.RoleEditor, Tag: "targets",
			Summary: "Add a target to a service", Body: storage.Target{}, Response: storage.Target{}, Statuses: []int{400},
			Handle: createTarget},
		&api.Endpoint{Method: "PUT", Path: "/api/v1/targets/{id}", Role: api.RoleEditor, Tag: "targets",
			Summary: "Replace a target", Body: storage.Target{}, Response: storage.Target{}, Statuses: []int{400, 404},
			Handle: func(c *api.Call) (any, error) {
				return targets.Replace(c, func(old, v *storage.Target) error { v.ServiceID = old.ServiceID; return nil })
			}},
		&api.Endpoint{Method: "DELETE", Path: "/api/v1/targets/{id}", Role: api.RoleEditor, Tag: "targets",
			Summary: "Delete a target", Response: api.Deleted{}, Statuses: []int{404}, Handle: targets.Remove},
	)
	return eps
}

func listTargets(c *api.Call) (any, error) {
	out := make([]storage.Target, 0)
	id, err := c.ID("service_id")
	if err != nil {
		return nil, err // not an id (a valid id of no service lists nothing)
	}
	if err := c.CP.Store().DB.WithContext(c.Ctx()).Where("service_id = ?", id).Order("id").Find(&out).Error; err != nil {
		return nil, err
	}
	return out, nil
}

func createTarget(c *api.Call) (any, error) {
	sid, err := c.ID("service_id")
	if err != nil {
		return nil, err
	}
	targets := targets
	targets.Check = func(tx *gorm.DB, t *storage.Target) error {
		return api.Exists[storage.Service](tx, "service_id", t.ServiceID)
	}
	return targets.Create(c, func(t *storage.Target) error { t.ServiceID = sid; return nil })
}
