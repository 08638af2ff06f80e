package storage

import (
	"time"

	"github.com/caddy-gateway/gateway/internal/consumers"
)

// Credential is a consumer's key-auth key, basic-auth login or jwt key. The
// row holds every kind's fields (consumers.Kind says which apply); the API
// shapes per type live with the credential handlers.
type Credential struct {
	ID           int64     `json:"id" gorm:"primaryKey"`
	ConsumerID   int64     `json:"consumer_id" gorm:"index;not null"`
	Consumer     *Consumer `json:"-" gorm:"constraint:OnDelete:CASCADE"`
	Type         string    `json:"type"`
	Key          *string   `json:"key,omitempty" gorm:"index"` // key-auth key, jwt key (iss)
	Username     *string   `json:"username,omitempty" gorm:"index"`
	PasswordHash string    `json:"-"`
	Algorithm    *string   `json:"algorithm,omitempty"`
	Secret       string    `json:"-"`
	PublicKey    *string   `json:"public_key,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
}

// CredentialRow is the stored row of a credential (compiled form c, checked
// with consumers.Prepare) of consumer consumerID.
func CredentialRow(consumerID int64, c consumers.Credential) *Credential {
	opt := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	return &Credential{ConsumerID: consumerID, Type: c.Type, Key: opt(c.Key), Username: opt(c.Username),
		PasswordHash: c.PasswordHash, Algorithm: opt(c.Algorithm), Secret: c.Secret, PublicKey: opt(c.PublicKey)}
}

// Compiled is the credential as the auth plugins see it, its kind's
// defaults filled in.
func (cr *Credential) Compiled() consumers.Credential {
	c := consumers.Credential{ID: cr.ID, Type: cr.Type, Key: deref(cr.Key), Username: deref(cr.Username),
		PasswordHash: cr.PasswordHash, Algorithm: deref(cr.Algorithm), Secret: cr.Secret, PublicKey: deref(cr.PublicKey)}
	if k, ok := consumers.KindOf(c.Type); ok && k.Normalize != nil {
		k.Normalize(&c)
	}
	return c
}

// CompileConsumers is the consumer table of a snapshot, each consumer with
// its credentials, as the auth plugins see it.
func CompileConsumers(snap *Snapshot) []consumers.Consumer {
	byID := map[int64]int{}
	out := make([]consumers.Consumer, 0, len(snap.Consumers))
	for _, c := range snap.Consumers {
		byID[c.ID] = len(out)
		out = append(out, consumers.Consumer{ID: c.ID, Username: c.Username, CustomID: c.CustomID, Groups: c.Groups})
	}
	for i := range snap.Credentials {
		cr := &snap.Credentials[i]
		if j, ok := byID[cr.ConsumerID]; ok {
			out[j].Credentials = append(out[j].Credentials, cr.Compiled())
		}
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
