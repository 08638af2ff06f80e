// Package consumers holds the compiled consumer and credential table that the
// authentication plugins (key-auth, basic-auth, jwt) look identities up in,
// the registry of credential kinds (Kind) and the X-Consumer-* headers that
// carry an identity upstream.
package consumers

import (
	"net/http"
	"strconv"
	"strings"
)

// Consumer is an authenticated identity, as compiled into the running config.
type Consumer struct {
	ID          int64        `json:"id"`
	Username    string       `json:"username"`
	CustomID    *string      `json:"custom_id,omitempty"`
	Groups      []string     `json:"groups,omitempty"`
	Credentials []Credential `json:"credentials,omitempty"`
}

// Credential is one credential of a consumer, with the secret material the
// plugins need to verify it; its kind (Kind) says which fields it has.
type Credential struct {
	ID   int64  `json:"id"`
	Type string `json:"type"` // key-auth, basic-auth, jwt
	// key-auth: the key; jwt: the value matched against the key claim (iss).
	Key string `json:"key,omitempty"`
	// basic-auth
	Username     string `json:"username,omitempty"`
	PasswordHash string `json:"password_hash,omitempty"` // bcrypt
	// jwt
	Algorithm string `json:"algorithm,omitempty"`
	Secret    string `json:"secret,omitempty"`
	PublicKey string `json:"public_key,omitempty"`
}

// Table indexes consumers by credential: per kind, by the kind's Unique
// field. Build it once per config load with NewTable; it is read-only
// afterwards and safe for concurrent use.
type Table struct {
	byKind     map[string]map[string]entry
	byID       map[int64]*Consumer
	byUsername map[string]*Consumer
	byCustomID map[string]*Consumer
}

type entry struct {
	Consumer   *Consumer
	Credential *Credential
}

// NewTable indexes list.
func NewTable(list []Consumer) *Table {
	t := &Table{byKind: map[string]map[string]entry{}, byID: map[int64]*Consumer{},
		byUsername: map[string]*Consumer{}, byCustomID: map[string]*Consumer{}}
	for _, k := range Kinds() {
		t.byKind[k.Name] = map[string]entry{}
	}
	for i := range list {
		c := &list[i]
		t.byID[c.ID] = c
		t.byUsername[c.Username] = c
		if c.CustomID != nil && *c.CustomID != "" {
			t.byCustomID[*c.CustomID] = c
		}
		for j := range c.Credentials {
			cr := &c.Credentials[j]
			if k, ok := KindOf(cr.Type); ok {
				t.byKind[k.Name][*cr.Field(k.Unique)] = entry{c, cr}
			}
		}
	}
	return t
}

// Lookup finds the credential of kind whose identifying (Unique) value is
// value, and its consumer.
func (t *Table) Lookup(kind, value string) (*Consumer, *Credential) {
	if t == nil {
		return nil, nil
	}
	e := t.byKind[kind][value]
	return e.Consumer, e.Credential
}

// ByID finds a consumer by id.
func (t *Table) ByID(id int64) *Consumer {
	if t == nil {
		return nil
	}
	return t.byID[id]
}

// ByUsername finds a consumer by username.
func (t *Table) ByUsername(name string) *Consumer {
	if t == nil {
		return nil
	}
	return t.byUsername[name]
}

// ByCustomID finds a consumer by custom_id.
func (t *Table) ByCustomID(id string) *Consumer {
	if t == nil {
		return nil
	}
	return t.byCustomID[id]
}

// Identity headers sent upstream for an authenticated consumer.
const (
	HeaderID       = "X-Consumer-ID"
	HeaderUsername = "X-Consumer-Username"
	HeaderCustomID = "X-Consumer-Custom-ID"
	HeaderGroups   = "X-Consumer-Groups"
	// HeaderCredential names the credential that authenticated the
	// request, as Kong's: a key-auth credential's id, a basic-auth
	// credential's username, a jwt credential's key.
	HeaderCredential = "X-Credential-Identifier"
	// HeaderAnonymous says that an auth plugin let the request through as
	// its anonymous consumer (Kong's header). Only a plugin sets it.
	HeaderAnonymous = "X-Anonymous-Consumer"
)

// The identity headers' canonical forms (http.Header keys), so that the
// per-request header work indexes the map without canonicalizing (and
// allocating) a name each time.
var (
	canonicalID       = http.CanonicalHeaderKey(HeaderID)
	canonicalUsername = http.CanonicalHeaderKey(HeaderUsername)
	canonicalCustomID = http.CanonicalHeaderKey(HeaderCustomID)
	canonicalGroups   = http.CanonicalHeaderKey(HeaderGroups)
	canonicalCred     = http.CanonicalHeaderKey(HeaderCredential)
	canonicalAnon     = http.CanonicalHeaderKey(HeaderAnonymous)
)

// identityHeaders are the canonical names of every header that tells the
// upstream who sent the request.
var identityHeaders = [...]string{canonicalID, canonicalUsername, canonicalCustomID, canonicalGroups, canonicalCred, canonicalAnon}

// StripHeaders removes client-sent copies of the identity headers: the
// headers themselves, and any header whose name reads as one of them when
// '_' is taken for '-' (X_Consumer_Username, x_consumer_id). Upstreams
// that see headers as CGI-style variables (HTTP_X_CONSUMER_USERNAME: PHP,
// Django, any CGI) cannot tell those from the gateway's own, so a client
// could otherwise forge an identity. The router calls it for every
// request, authenticated or not.
func StripHeaders(h http.Header) {
	deleteIdentity(h)
	delete(h, canonicalCred)
	delete(h, canonicalAnon)
	DeleteLookalikes(h, identityHeaders[:])
}

// deleteIdentity deletes the identity headers themselves.
func deleteIdentity(h http.Header) {
	delete(h, canonicalID)
	delete(h, canonicalUsername)
	delete(h, canonicalCustomID)
	delete(h, canonicalGroups)
	delete(h, canonicalAnon)
}

// DeleteLookalikes deletes every header of h whose name contains '_' and
// equals one of names (dash-spelled) when '_' is read as '-', ignoring
// case. It allocates nothing, and does no more than scan the names of h
// when none contains '_' (the usual request).
func DeleteLookalikes(h http.Header, names []string) {
	for k := range h {
		if strings.IndexByte(k, '_') < 0 {
			continue
		}
		for _, n := range names {
			if lookalike(k, n) {
				delete(h, k)
				break
			}
		}
	}
}

// lookalike reports whether k equals name with '_' read as '-', ignoring
// ASCII case.
func lookalike(k, name string) bool {
	if len(k) != len(name) {
		return false
	}
	for i := 0; i < len(k); i++ {
		a, b := lower(k[i]), lower(name[i])
		if a == '_' {
			a = '-'
		}
		if a != b {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + ('a' - 'A')
	}
	return c
}

// SetCredentialHeader sets X-Credential-Identifier on an upstream request
// to id, or removes it when id is "" (a consumer that no credential
// identified, or one a later auth plugin replaced).
func SetCredentialHeader(h http.Header, id string) {
	if id == "" {
		delete(h, canonicalCred)
		return
	}
	h[canonicalCred] = []string{id}
}

// HeaderValues is the number of values SetHeaders stores.
const HeaderValues = 4

// SetHeaders writes c's identity headers onto an upstream request,
// replacing client-sent copies. The values are stored in vals (at least
// HeaderValues long; allocated when nil), capacity-limited per header so
// an append to one never writes into another: one allocation at most
// instead of four.
//
// The router has already removed the client's lookalike spellings
// (StripHeaders), so only the headers themselves are replaced here.
func SetHeaders(h http.Header, c *Consumer, vals []string) {
	deleteIdentity(h)
	if len(vals) < HeaderValues {
		vals = make([]string, HeaderValues)
	}
	vals[0] = strconv.FormatInt(c.ID, 10)
	vals[1] = c.Username
	vals[2] = strings.Join(c.Groups, ",")
	h[canonicalID] = vals[0:1:1]
	h[canonicalUsername] = vals[1:2:2]
	h[canonicalGroups] = vals[2:3:3]
	if c.CustomID != nil {
		vals[3] = *c.CustomID
		h[canonicalCustomID] = vals[3:4:4]
	}
}

// SetAnonymous marks an upstream request as coming from an anonymous
// consumer (after SetHeaders, which removes the mark).
func SetAnonymous(h http.Header) { h[canonicalAnon] = []string{"true"} }
