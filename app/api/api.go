// Package api is the admin API framework: endpoints declared with their
// least role and body and answer declarations (Endpoint), the request
// (Call), errors, the generic CRUD of a stored resource (Resource[T]) and
// the OpenAPI document built from the declarations. The features (packages
// resources, observe, auth, certs …) declare endpoints; package app
// hands them to New. Its tests are app/tests (api, input, contract and
// openapi tests run a real gateway).
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-gateway/gateway/app/controlplane"
	"github.com/caddy-gateway/gateway/schema"
	"github.com/caddy-gateway/gateway/storage"
)

// Role is what a caller may do. Every endpoint declares the least role it
// needs in its endpoint entry: that table is the single place where access
// is decided, so a new endpoint cannot forget it.
type Role int

// Roles, weakest first.
const (
	RolePublic Role = iota // no authentication
	RoleViewer
	RoleEditor
	RoleAdmin
)

var roleNames = map[Role]string{RolePublic: "public", RoleViewer: "viewer", RoleEditor: "editor", RoleAdmin: "admin"}

func (r Role) String() string { return roleNames[r] }

// ParseRole maps "viewer", "editor", "admin" to a Role.
func ParseRole(s string) (Role, bool) {
	for r, n := range roleNames {
		if n == s && r != RolePublic {
			return r, true
		}
	}
	return RolePublic, false
}

// Principal is who is calling.
type Principal struct {
	Role   string `json:"role" schema:"enum=viewer|editor|admin"`
	Method string `json:"method" schema:"enum=open|token|session"`
	User   *User  `json:"user" doc:"The signed-in user (session); null for the admin token and in open mode."`
}

// User is a user of the admin API as answers show it (the User schema of
// the users endpoints and Principal.user). The admin-authentication feature
// declares the input (UserInput).
type User struct {
	ID          int64      `json:"id"`
	Email       string     `json:"email" schema:"format=email" doc:"Unique (case-insensitive); the key of password and SSO sign-in."`
	Name        string     `json:"name"`
	Role        string     `json:"role" schema:"enum=viewer|editor|admin"`
	HasPassword bool       `json:"has_password" doc:"false for SSO-only accounts."`
	SSOLinked   bool       `json:"sso_linked" doc:"Linked to an identity at the SSO provider (its sub) by an SSO sign-in: only that identity signs in to the account through SSO. Changing the email, or the SSO issuer or client_id, unlinks it."`
	CreatedAt   time.Time  `json:"created_at"`
	LastLoginAt *time.Time `json:"last_login_at"`
}

// Authenticator decides who a request comes from. It returns ErrUnauthenticated
// (401) when authentication is enabled and the request carries no valid
// credential. The admin-authentication feature installs its own with
// API.SetAuthenticator; the default treats every caller as admin (open mode).
type Authenticator interface {
	Authenticate(r *http.Request, ep *Endpoint) (*Principal, error)
}

// ErrUnauthenticated answers 401.
var ErrUnauthenticated = errors.New("authentication required")

type openAuth struct{}

func (openAuth) Authenticate(*http.Request, *Endpoint) (*Principal, error) {
	return &Principal{Role: "admin", Method: "open"}, nil
}

// Endpoint declares one admin API operation: path, least role, the
// declarations of its body and answer (for validation and the OpenAPI
// document), and its handler.
type Endpoint struct {
	Method  string
	Path    string // ServeMux pattern path, e.g. /api/v1/services/{id}
	Role    Role
	Tag     string
	Summary string
	// Description is extra text for the OpenAPI document (decisions where
	// the spec is silent go here).
	Description string
	// Body is the request body declaration (nil: no body).
	Body any
	// BodySchema overrides the generated request body schema.
	BodySchema map[string]any
	// Response is the answer's declaration; ResponseList: an array of it.
	Response     any
	ResponseList bool
	// ResponseSchema overrides the generated answer schema.
	ResponseSchema map[string]any
	// ContentType of a non-JSON answer (text/plain, text/html …).
	ContentType string
	// Query parameters for the OpenAPI document.
	Query []QueryParam
	// Statuses besides 200 that the endpoint answers.
	Statuses []int

	// Handle answers with a JSON value (200), or an error.
	Handle func(c *Call) (any, error)
	// Raw handles the request itself (streams, redirects, non-JSON).
	Raw func(c *Call)
}

// QueryParam documents a query parameter.
type QueryParam struct {
	Name, Type, Description string
	Required                bool
}

// API is the admin HTTP API.
type API struct {
	cp        *controlplane.ControlPlane
	mux       *http.ServeMux
	endpoints []*Endpoint
	byPattern map[string]*Endpoint // "METHOD /path" → endpoint
	auth      Authenticator
	logger    *zap.Logger
}

// New builds the admin API of cp serving endpoints; newAuth builds its
// authenticator (nil: open mode for ever, every caller is admin).
func New(cp *controlplane.ControlPlane, newAuth func(cp *controlplane.ControlPlane) (Authenticator, error), endpoints []*Endpoint) (*API, error) {
	a := &API{cp: cp, mux: http.NewServeMux(), auth: openAuth{}, logger: cp.Logger().Named("api")}
	if newAuth != nil {
		auth, err := newAuth(cp)
		if err != nil {
			return nil, fmt.Errorf("admin authentication: %w", err)
		}
		a.auth = auth
	}
	a.endpoints = SortEndpoints(endpoints)
	a.byPattern = map[string]*Endpoint{}
	for _, ep := range a.endpoints {
		ep := ep
		a.byPattern[ep.Method+" "+ep.Path] = ep
		a.mux.HandleFunc(ep.Method+" "+ep.Path, func(w http.ResponseWriter, r *http.Request) { a.serve(ep, w, r) })
	}
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { a.unmatched(w, r, true) })
	return a, nil
}

// SortEndpoints orders endpoints by path (stable: a path's methods keep
// their declared order), as the API and its documents list them.
func SortEndpoints(eps []*Endpoint) []*Endpoint {
	sort.SliceStable(eps, func(i, j int) bool { return eps[i].Path < eps[j].Path })
	return eps
}

// Authenticator is the installed authenticator.
func (a *API) Authenticator() Authenticator { return a.auth }

// SetAuthenticator installs the authenticator.
func (a *API) SetAuthenticator(auth Authenticator) { a.auth = auth }

// Endpoints lists the declared endpoints.
func (a *API) Endpoints() []*Endpoint { return a.endpoints }

// ServeHTTP implements http.Handler: requests for a host name the admin
// listener does not have (DNS rebinding) and cross-origin browser requests
// are refused first, then requests go to their endpoint; what matches none
// (or only the dashboard's GET catch-all) is unmatched.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// No answer is ever to be read as another type than it says: JSON
	// carrying stored names, a text/plain metric label or an error
	// echoing a path must not become HTML or script in a browser.
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if err := a.checkHost(r); err != nil {
		WriteJSON(w, http.StatusForbidden, errorBody{err.Error()})
		return
	}
	if err := a.crossOrigin(r); err != nil {
		WriteJSON(w, http.StatusForbidden, errorBody{err.Error()})
		return
	}
	if !canonicalAPIPath(r.URL.Path) {
		a.unmatched(w, r, false)
		return
	}
	if _, pattern := a.mux.Handler(r); isCatchAll(pattern) && r.URL.Path != "/" {
		a.unmatched(w, r, true)
		return
	}
	a.mux.ServeHTTP(w, r)
}

// canonicalAPIPath is false for a path under /api/ that net/http's mux
// would redirect to a cleaned form (/api/v1/services//targets, /./, /../)
// with an HTML answer: the API answers it as no endpoint, in JSON.
func canonicalAPIPath(p string) bool {
	if !strings.HasPrefix(p, "/api/") {
		return true
	}
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") {
		c += "/"
	}
	return c == p
}

// isCatchAll tells the patterns that match any path: the API's own and
// the dashboard's GET /.
func isCatchAll(pattern string) bool { return pattern == "/" || pattern == "GET /" }

// crossOrigin refuses cross-origin browser requests with an unsafe method
// (CSRF): net/http.CrossOriginProtection decides by Sec-Fetch-Site, else by
// Origin against the request's Host. Same-origin browser requests and
// clients that are not browsers (no such headers) pass whatever their
// Content-Type. The settings' public_url origin is trusted as well (the
// dashboard behind a proxy that changes Host); it is read only for a
// request the plain check refuses.
func (a *API) crossOrigin(r *http.Request) error {
	err := sameOrigin.Check(r)
	if err == nil {
		return nil
	}
	if origin := a.publicOrigin(r); origin != "" {
		p := http.NewCrossOriginProtection()
		if p.AddTrustedOrigin(origin) == nil && p.Check(r) == nil {
			return nil
		}
	}
	return errors.New("cross-origin request refused: a browser on another origin may not change the admin API (CSRF protection)")
}

var sameOrigin = http.NewCrossOriginProtection()

// checkHost refuses a request whose Host is a name the admin listener was
// not given (DNS rebinding): a page of evil.example, whose name its owner
// then points at 127.0.0.1, reaches the admin API as its own origin, so
// neither the browser's same-origin policy nor crossOrigin stop it, and in
// open mode it is admin. As Caddy's own admin endpoint does, a listener
// bound to one address accepts only names that cannot be rebound: an IP
// address, localhost, and the host of settings.public_url (read only when
// the others do not match). A listener on every interface (0.0.0.0, ::) is
// reached by names the gateway cannot know, and is not checked. A request
// without Host (HTTP/1.0) comes from no browser and passes.
func (a *API) checkHost(r *http.Request) error {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	}
	if host == "" || strings.EqualFold(host, "localhost") {
		return nil
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return nil
	}
	if a.cp == nil {
		return nil
	}
	if ap, err := netip.ParseAddrPort(a.cp.AdminAddr()); err != nil || ap.Addr().IsUnspecified() {
		return nil
	}
	if u := a.publicURL(r); u != nil && strings.EqualFold(u.Hostname(), host) {
		return nil
	}
	return fmt.Errorf("Host: %q is not a name of the admin listener: use its IP address or localhost, or set settings.public_url to the URL it is reached by (DNS rebinding protection)", r.Host)
}

// publicOrigin is the origin (scheme://host[:port]) of settings.public_url,
// or "".
func (a *API) publicOrigin(r *http.Request) string {
	u := a.publicURL(r)
	if u == nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// publicURL is settings.public_url with a scheme and a host, or nil.
func (a *API) publicURL(r *http.Request) *url.URL {
	if a.cp == nil || a.cp.Store() == nil {
		return nil
	}
	var s storage.Settings
	if err := a.cp.Store().DB.WithContext(r.Context()).Select("public_url").Where("id = ?", 1).Limit(1).Find(&s).Error; err != nil || s.PublicURL == "" {
		return nil
	}
	u, err := url.Parse(s.PublicURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil
	}
	return u
}

// unmatched answers a request no endpoint serves. Under /api/ a caller
// must authenticate first (401 before 404 or 405, so the API cannot be
// mapped anonymously) unless the path is a public endpoint's. A path served
// for other methods is 405 with Allow; anything else 404. A path that is
// not canonical (canonicalAPIPath) is no endpoint for any method.
func (a *API) unmatched(w http.ResponseWriter, r *http.Request, canonical bool) {
	var allowed []string
	public := false
	if canonical {
		allowed, public = a.methodsFor(r)
	}
	if strings.HasPrefix(r.URL.Path, "/api/") && !public {
		if _, err := a.auth.Authenticate(r, &Endpoint{Path: r.URL.Path, Role: RoleViewer}); err != nil {
			if errors.Is(err, ErrUnauthenticated) {
				WriteJSON(w, http.StatusUnauthorized, errorBody{err.Error()})
				return
			}
			a.fail(w, r, err)
			return
		}
	}
	if len(allowed) > 0 {
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		WriteJSON(w, http.StatusMethodNotAllowed, errorBody{"method " + r.Method + " is not allowed here; allowed: " + strings.Join(allowed, ", ")})
		return
	}
	WriteJSON(w, http.StatusNotFound, errorBody{"no such endpoint: " + r.Method + " " + r.URL.Path})
}

// methodsFor lists the methods the request's path is served for (by
// asking the mux as if the request had each method), and whether one of
// those endpoints is public.
func (a *API) methodsFor(r *http.Request) (allowed []string, public bool) {
	for _, m := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"} {
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: http.Header{}}
		_, pattern := a.mux.Handler(probe)
		if pattern == "" || isCatchAll(pattern) {
			continue
		}
		allowed = append(allowed, m)
		if ep := a.byPattern[pattern]; ep != nil && ep.Role == RolePublic {
			public = true
		}
	}
	return allowed, public
}

// maxBody is the admin API's request body limit, maxPublicBody that of
// the endpoints anyone may call (docs/operations.md): sign-in takes an
// email and a password, and a 20 MiB body from an anonymous client cost
// the gateway some 130 MB to read and decode before its 400.
const (
	maxBody       = 20 << 20
	maxPublicBody = 64 << 10
)

// BodyLimit is the most the endpoint reads of a request body (400 past it).
func (ep *Endpoint) BodyLimit() int64 {
	if ep.Role == RolePublic {
		return maxPublicBody
	}
	return maxBody
}

// byteSize writes n (a multiple of 1 KiB) as "20 MiB" or "64 KiB".
func byteSize(n int64) string {
	if n%(1<<20) == 0 {
		return strconv.FormatInt(n>>20, 10) + " MiB"
	}
	return strconv.FormatInt(n>>10, 10) + " KiB"
}

type principalKey struct{}

// PrincipalFrom returns the caller of an admin request.
func PrincipalFrom(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// errForbidden is authorize's answer to a caller whose role is not enough.
var errForbidden = errors.New("role not enough")

// authorize authenticates r's caller for ep (not a public endpoint) and
// checks its role: ErrUnauthenticated (401), errForbidden (403), or
// another error (reaching the store failed).
func (a *API) authorize(r *http.Request, ep *Endpoint) (*Principal, error) {
	p, err := a.auth.Authenticate(r, ep)
	if err != nil {
		return nil, err
	}
	if role, _ := ParseRole(p.Role); role < ep.Role {
		return nil, errForbidden
	}
	return p, nil
}

func (a *API) serve(ep *Endpoint, w http.ResponseWriter, r *http.Request) {
	if ep.Role != RolePublic {
		p, err := a.authorize(r, ep)
		switch {
		case errors.Is(err, ErrUnauthenticated):
			WriteJSON(w, http.StatusUnauthorized, errorBody{err.Error()})
			return
		case errors.Is(err, errForbidden):
			WriteJSON(w, http.StatusForbidden, errorBody{"this needs the " + ep.Role.String() + " role"})
			return
		case err != nil:
			a.fail(w, r, err)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), principalKey{}, p))
	}
	r.Body = http.MaxBytesReader(w, r.Body, ep.BodyLimit())
	c := &Call{W: w, R: r, API: a, CP: a.cp, ep: ep}
	if ep.Raw != nil {
		ep.Raw(c)
		return
	}
	v, err := ep.Handle(c)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if ep.Method != http.MethodGet && ep.Role != RolePublic {
		a.logChange(ep, r)
	}
	WriteJSON(w, http.StatusOK, v)
}

// logChange writes one line per change made through the API: who, what,
// and the configuration version live afterwards.
func (a *API) logChange(ep *Endpoint, r *http.Request) {
	who := "open mode"
	if p := PrincipalFrom(r.Context()); p != nil {
		switch {
		case p.User != nil:
			who = p.User.Email
		case p.Method == "token":
			who = "admin token"
		}
	}
	// The stored version, as GET /api/v1/config reports it (the same on
	// every node of a cluster).
	a.logger.Info("admin change", zap.String("who", who), zap.String("what", r.Method+" "+r.URL.Path),
		zap.String("action", ep.Summary), zap.Int64("config_version", a.cp.AppliedConfigVersion()))
}

// Call is one admin request.
type Call struct {
	W   http.ResponseWriter
	R   *http.Request
	API *API
	CP  *controlplane.ControlPlane

	ep *Endpoint
}

// StillAllowed authenticates the call's request again and checks its role,
// for a response that lasts (the event stream): a credential revoked since
// the request began (the admin token rotated or deleted, the user deleted,
// signed out or given a new password, on this node or another of
// the cluster: they share the store) ends it. It reports false only for a
// credential no longer valid or a role no longer enough; an error reaching
// the store leaves the call going.
func (c *Call) StillAllowed() bool {
	if c.ep == nil || c.ep.Role == RolePublic {
		return true
	}
	_, err := c.API.authorize(c.R, c.ep)
	return !errors.Is(err, ErrUnauthenticated) && !errors.Is(err, errForbidden)
}

// Ctx is the request context.
func (c *Call) Ctx() context.Context { return c.R.Context() }

// ID reads an id path parameter: 400 unless it is an Id written the one
// canonical way (see ParseID).
func (c *Call) ID(name string) (int64, error) {
	s := c.R.PathValue(name)
	n, ok := ParseID(s)
	if !ok {
		return 0, BadRequest(name + ": " + strconv.Quote(s) + " is not an id (a positive integer in decimal without sign or leading zeros)")
	}
	return n, nil
}

// ParseID parses an Id in its one canonical form: decimal digits, no sign,
// no leading zero, no space, 1..9223372036854775807. "01", "+1", "1.0",
// " 1" and overflowing numbers are not ids, so one resource has one URL.
func ParseID(s string) (int64, bool) {
	if s == "" || len(s) > 19 || s[0] == '0' {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// Decode reads the body into a declared struct (defaults, strict fields,
// validation).
func (c *Call) Decode(dst any) error {
	body, err := io.ReadAll(c.R.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return BadRequest("request body is larger than " + byteSize(mbe.Limit))
		}
		return BadRequest("reading request body: " + err.Error())
	}
	return schema.Decode(body, dst)
}

// APIError is an answer with a status and {error}.
type APIError struct {
	Status int
	Msg    string
}

func (e *APIError) Error() string { return e.Msg }

// BadRequest is a 400.
func BadRequest(msg string) error { return &APIError{http.StatusBadRequest, msg} }

// NotFound is a 404.
func NotFound(msg string) error { return &APIError{http.StatusNotFound, msg} }

// ErrorBody is the shape of every error answer.
type ErrorBody = errorBody

type errorBody struct {
	Error string `json:"error"`
}

// Fail answers an error (for Raw handlers).
func (c *Call) Fail(err error) { c.API.fail(c.W, c.R, err) }

// fail answers an error: validation, conflicts and foreign keys are 400,
// missing resources 404, the rest 500 (details logged, not answered).
func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ae *APIError
	var fe *schema.FieldError
	var le *controlplane.LoadError
	switch {
	case errors.As(err, &ae):
		WriteJSON(w, ae.Status, errorBody{ae.Msg})
	case errors.As(err, &fe):
		WriteJSON(w, http.StatusBadRequest, errorBody{fe.Error()})
	case storage.IsNotFound(err):
		WriteJSON(w, http.StatusNotFound, errorBody{"not found"})
	case storage.IsConflict(err):
		WriteJSON(w, http.StatusBadRequest, errorBody{"conflict: a resource with the same unique value exists"})
	case storage.IsForeignKey(err):
		WriteJSON(w, http.StatusBadRequest, errorBody{"a referenced resource does not exist"})
	case errors.As(err, &le):
		WriteJSON(w, http.StatusBadRequest, errorBody{le.Error()})
	case errors.Is(err, controlplane.ErrNoBase), errors.Is(err, controlplane.ErrBaseChanged):
		WriteJSON(w, http.StatusServiceUnavailable, errorBody{err.Error()})
	case a.cp.StoreUnreachable(r.Context()):
		a.logger.Warn("admin request refused: the database is unreachable", zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err))
		WriteJSON(w, http.StatusServiceUnavailable, errorBody{"the database is unreachable: nothing was changed; try again later"})
	default:
		a.logger.Error("admin request failed", zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err))
		WriteJSON(w, http.StatusInternalServerError, errorBody{"internal error"})
	}
}

// WriteJSON answers v as JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":"encoding the answer failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// Deleted is the answer of every delete (DeleteResult in the contract and
// in the OpenAPI document).
type Deleted = DeleteResult

type deleted = DeleteResult

// DeleteResult is the answer of every delete: always {"deleted": true}.
type DeleteResult struct {
	Deleted bool `json:"deleted" doc:"Always true."`
}

func (c *Call) queryBool(name string) bool {
	v := strings.ToLower(c.R.URL.Query().Get(name))
	return v == "1" || v == "true" || v == "yes"
}
