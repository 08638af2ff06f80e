package compiler

import (
	"github.com/caddy-gateway/gateway/modules/consumers"
	"github.com/caddy-gateway/gateway/storage"
)

// compileConsumers builds the consumer table the auth plugins read.
func compileConsumers(snap *storage.Snapshot) []consumers.Consumer {
	byID := map[int64]int{}
	out := make([]consumers.Consumer, 0, len(snap.Consumers))
	for _, c := range snap.Consumers {
		byID[c.ID] = len(out)
		out = append(out, consumers.Consumer{ID: c.ID, Username: c.Username, CustomID: c.CustomID, Groups: c.Groups})
	}
	for _, cr := range snap.Credentials {
		i, ok := byID[cr.ConsumerID]
		if !ok {
			continue
		}
		out[i].Credentials = append(out[i].Credentials, consumers.Credential{
			ID: cr.ID, Type: cr.Type, Key: deref(cr.Key), Username: deref(cr.Username),
			PasswordHash: cr.PasswordHash, Algorithm: deref(cr.Algorithm), Secret: cr.Secret,
			PublicKey: deref(cr.PublicKey),
		})
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
