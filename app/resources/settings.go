package resources

import (
	"gorm.io/gorm"

	"github.com/caddy-gateway/gateway/app/api"
	"github.com/caddy-gateway/gateway/app/domain"
	"github.com/caddy-gateway/gateway/storage"
)

func settingsEndpoints() []*api.Endpoint {
	return []*api.Endpoint{
		{Method: "GET", Path: "/api/v1/settings", Role: api.RoleViewer, Tag: "settings", Summary: "Get the global settings",
			Response: storage.Settings{}, Handle: getSettings},
		{Method: "PUT", Path: "/api/v1/settings", Role: api.RoleAdmin, Tag: "settings",
			Summary:     "Replace the global settings",
			Description: "Full replacement; an omitted http_listen or https_listen is reset to the Caddyfile's value (else :8080 / :8443). Listener changes apply at once: the new address is bound before the answer (400 when it cannot be), the old one is closed gracefully. https_listen binds only while https_enabled is true. The listeners must not collide with the admin API listener, Caddy's admin endpoint or a stream route (400).",
			Body:        storage.Settings{}, Response: storage.Settings{}, Statuses: []int{400}, Handle: putSettings},
	}
}

func getSettings(c *api.Call) (any, error) {
	var s storage.Settings
	if err := c.CP.Store().DB.WithContext(c.Ctx()).First(&s, 1).Error; err != nil {
		return nil, err
	}
	return &s, nil
}

func putSettings(c *api.Call) (any, error) {
	s := c.CP.DefaultSettings()
	if err := c.Decode(s); err != nil {
		return nil, err
	}
	s.ID = 1
	if err := api.Write(c, s, domain.CheckSettings, (*gorm.DB).Save); err != nil {
		return nil, err
	}
	return s, nil
}
