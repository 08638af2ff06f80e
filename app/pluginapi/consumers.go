package pluginapi

import (
	"gorm.io/gorm"

	"github.com/caddy-gateway/gateway/app/api"
	"github.com/caddy-gateway/gateway/schema"
	"github.com/caddy-gateway/gateway/storage"
)

var consumerResource = api.Resource[storage.Consumer]{
	Kind:  "consumer",
	Check: checkConsumer, // credentials go with their consumer (foreign key)
}

// checkConsumer enforces the unique username and custom_id with answers
// that name the field (the unique indexes stay as the last guard).
func checkConsumer(tx *gorm.DB, c *storage.Consumer) error {
	taken := func(col string, v any) (bool, error) {
		var n int64
		err := tx.Model(&storage.Consumer{}).Where(col+" = ? AND id <> ?", v, c.ID).Count(&n).Error
		return n > 0, err
	}
	if t, err := taken("username", c.Username); err != nil {
		return err
	} else if t {
		return schema.Errorf("username", "%q is already taken by another consumer", c.Username)
	}
	if c.CustomID != nil {
		if t, err := taken("custom_id", *c.CustomID); err != nil {
			return err
		} else if t {
			return schema.Errorf("custom_id", "%q is already taken by another consumer", *c.CustomID)
		}
	}
	return nil
}

var credentialResource = api.Resource[storage.Credential]{Kind: "credential"}

func consumerEndpoints() []*api.Endpoint {
	eps := consumerResource.CRUD("/api/v1/consumers", "consumers", api.RoleViewer, api.RoleEditor, storage.Consumer{})
	for _, ep := range eps {
		ep.Description = "username (1..128 characters) is unique; custom_id is unique when set; groups are the consumer's ACL groups."
		if ep.Method == "DELETE" {
			ep.Summary = "Delete a consumer and its credentials"
		}
	}
	one, list := credentialOutputSchema()
	eps = append(eps,
		&api.Endpoint{Method: "GET", Path: "/api/v1/consumers/{consumer_id}/credentials", Role: api.RoleViewer, Tag: "credentials",
			Summary:        "List a consumer's credentials, secrets redacted (an empty array when the consumer does not exist)",
			ResponseSchema: list, Handle: listCredentials},
		&api.Endpoint{Method: "POST", Path: "/api/v1/consumers/{consumer_id}/credentials", Role: api.RoleEditor, Tag: "credentials",
			Summary:     "Add a credential to a consumer",
			Description: credentialDescription(),
			Body:        Credential{}, ResponseSchema: one, Statuses: []int{400}, Handle: createCredential},
		&api.Endpoint{Method: "DELETE", Path: "/api/v1/credentials/{id}", Role: api.RoleEditor, Tag: "credentials",
			Summary: "Delete a credential", Response: api.Deleted{}, Statuses: []int{404}, Handle: credentialResource.Remove},
	)
	return eps
}

// CheckConsumer is the consumer endpoints' uniqueness check inside tx (used
// by the configuration import).
func CheckConsumer(tx *gorm.DB, c *storage.Consumer) error { return checkConsumer(tx, c) }
