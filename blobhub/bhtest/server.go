// Package bhtest serves a blobhub.LocalStore over a real HTTP server in the
// BlobHub wire format (docs/wire.md: the data/query and data/command
// channels, the status envelope, the ten-row default page and its cursor,
// the 403 of a missing object), with switches for the faults a run
// must survive: small pages, equal timestamps, injected 500/429 with
// Retry-After, slow and truncated bodies, connections dropped before or
// after an item is stored, list answers that never end and items stamped
// by a clock that jumped. It is not a _test package so every package's
// tests can import it.
package bhtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/blobhub"
)

// Keys and ids the server knows.
const (
	RunnerKey    = "bhk_runner_test"
	PersonKey    = "bhk_person_test"
	RunnerUserID = "usr_runner"
	PersonUserID = "usr_person"
	RevisionID   = "rev_test"
	SessionID    = "ses_test"
	// OrgID and BlobID name the blob whose revision RevisionID is (GET
	// /blobs/{org}/{blob} and …/revisions/{ref}, which the SDK reads
	// before it sends a data command).
	OrgID  = "org_test"
	BlobID = "blb_test"
	// SessionAlias is the alias get_session resolves to SessionID.
	SessionAlias = "test-session"

	// CmdMe names GET /users/me in the request log and in fault switches.
	CmdMe = blobhub.CmdMe
)

// Server is a fake BlobHub backed by a local store directory.
type Server struct {
	t     testing.TB
	srv   *httptest.Server
	store *blobhub.LocalStore

	mu         sync.Mutex
	keys       map[string]blobhub.User
	count      int
	commands   []string
	faults     []*fault
	slow       time.Duration
	dropStored int
	pageSize   int
	endless    map[string]*endless
	extra      map[string][]blobhub.Item
	fabricated int
	rewrite    map[string]func([]byte) []byte
	eventsCap  int
	gave       map[string]bool // every created_at an answer carried, as spelled
}

// endless is an alias whose list answers are made up: every answer a page
// of new items, pages times.
type endless struct {
	perPage, pages int
}

type faultKind int

const (
	faultStatus faultKind = iota
	faultTruncate
	faultDropBefore
)

type fault struct {
	kind       faultKind
	command    string // "" matches every command
	n          int
	status     int
	retryAfter string
}

// Option configures New.
type Option func(*Server)

// WithDir serves dir instead of a fresh temporary directory.
func WithDir(dir string) Option {
	return func(s *Server) { s.store = blobhub.OpenLocalStore(dir) }
}

// WithKey maps another API key to a user.
func WithKey(key string, u blobhub.User) Option {
	return func(s *Server) { s.keys[key] = u }
}

// New starts a server; it closes when the test ends.
func New(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s := &Server{
		t: t,
		keys: map[string]blobhub.User{
			RunnerKey: {UserID: RunnerUserID, Name: "Runner Test", Email: "runner@example.test"},
			PersonKey: {UserID: PersonUserID, Name: "Person Test", Email: "person@example.test"},
		},
	}
	for _, o := range opts {
		o(s)
	}
	if s.store == nil {
		s.store = blobhub.OpenLocalStore(t.TempDir())
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/users/me", s.me)
	mux.HandleFunc("GET /v1/blobs/{org}/{blob}", s.blob)
	mux.HandleFunc("GET /v1/blobs/{org}/{blob}/revisions/{ref}", s.revision)
	mux.HandleFunc("POST /v1/revisions/{revision}/data/query", func(w http.ResponseWriter, r *http.Request) { s.data(w, r, false) })
	mux.HandleFunc("POST /v1/revisions/{revision}/data/command", func(w http.ResponseWriter, r *http.Request) { s.data(w, r, true) })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.record("")
		writeError(w, http.StatusNotFound, "not_found", "no such endpoint "+r.Method+" "+r.URL.Path)
	})
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	return s
}

// URL is the API base, ending in /v1.
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// Dir is the local store directory served.
func (s *Server) Dir() string { return s.store.Dir() }

// Store is the local store served.
func (s *Server) Store() *blobhub.LocalStore { return s.store }

// Config is a client configuration for this server, the default revision
// and session, and the given key, with retry waits shrunk to microseconds.
func (s *Server) Config(key string) blobhub.Config {
	return blobhub.Config{
		APIURL:       s.URL(),
		APIKey:       key,
		RevisionID:   RevisionID,
		SessionID:    SessionID,
		Timeout:      5 * time.Second,
		RetryBudget:  2 * time.Second,
		RetryWaitMin: time.Microsecond,
		RetryWaitMax: 10 * time.Microsecond,
	}
}

// Client is a client of Config(key).
func (s *Server) Client(key string) blobhub.Client {
	s.t.Helper()
	c, err := blobhub.New(s.Config(key))
	if err != nil {
		s.t.Fatalf("bhtest: client: %v", err)
	}
	return c
}

// Requests returns how many requests arrived and their commands in order
// (users_me for GET /users/me, "" for anything unrecognised).
func (s *Server) Requests() (int, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count, append([]string(nil), s.commands...)
}

// Count is how many requests of command arrived.
func (s *Server) Count(command string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.commands {
		if c == command {
			n++
		}
	}
	return n
}

// ResetCounts clears the request count and log.
func (s *Server) ResetCounts() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count, s.commands = 0, nil
}

// PageSize makes list_session_thread_items answer at most n items.
func (s *Server) PageSize(n int) {
	s.mu.Lock()
	s.pageSize = n
	s.mu.Unlock()
	s.store.SetPageSize(n)
}

// EndlessList makes the next pages list answers for alias a page of
// perPage new items that the store does not hold, as a server or proxy
// that never stops answering new items would: each made-up item has a
// fresh id, is stamped 1µs after the one before it, starting 1µs after
// created_since or the newest item the store holds for alias, whichever is
// later (an hour ago without either), so always in the past, and is
// the runner's own status item, so a run reads past it. The store's items
// are served again once the made-up pages are spent. The feed gets one
// event for the thread.
func (s *Server) EndlessList(alias string, perPage, pages int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.endless == nil {
		s.endless = map[string]*endless{}
	}
	s.endless[alias] = &endless{perPage: perPage, pages: pages}
	// The feed says the thread has new items, as it would of real ones.
	if err := s.store.AppendEvent(SessionID, blobhub.EventItemPosted, alias, "thread"); err != nil {
		s.t.Errorf("bhtest: event for the endless list of %q: %v", alias, err)
	}
}

// ServeItem adds it to every list answer of alias whose bounds admit its
// created_at, in created_at order within the page, as if the store held
// it: an item stamped by a server clock that jumped (in the future, say)
// among items stamped by the right clock. The store is not touched.
func (s *Server) ServeItem(alias string, it blobhub.Item) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.extra == nil {
		s.extra = map[string][]blobhub.Item{}
	}
	s.extra[alias] = append(s.extra[alias], it)
}

// madeUp answers a list query from an EndlessList switch; ok is false when
// none is on for alias.
// Only ascending pages are made up (a page back from a time is read
// from the store).
func (s *Server) madeUp(ctx context.Context, alias string, q blobhub.ItemQuery) (items []blobhub.Item, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.endless[alias]
	if e == nil || e.pages <= 0 || !q.Ascending {
		return nil, false
	}
	e.pages--
	at := time.Now().Add(-time.Hour)
	if t, err := blobhub.ParseTime(q.CreatedSince); err == nil {
		at = t
	}
	if last, err := s.store.ListItems(ctx, SessionID, alias, blobhub.ItemQuery{}); err == nil && len(last) > 0 {
		if t, err := blobhub.ParseTime(last[0].CreatedAt); err == nil && t.After(at) {
			at = t
		}
	}
	for range e.perPage {
		at = at.Add(time.Microsecond)
		s.fabricated++
		items = append(items, blobhub.Item{
			ID: fmt.Sprintf("itm_endless_%08d", s.fabricated), CreatedAt: blobhub.FormatTime(at), UserID: RunnerUserID,
			Content:  []blobhub.Block{{Type: "text", Text: fmt.Sprintf("made-up item %d", s.fabricated)}},
			Metadata: json.RawMessage(`{"type":"status","status":"endless"}`),
		})
	}
	return items, true
}

// withServed merges the ServeItem items of alias that q admits into a page
// the store answered, keeping the query's order and the page size.
func (s *Server) withServed(alias string, q blobhub.ItemQuery, page []blobhub.Item) []blobhub.Item {
	s.mu.Lock()
	extra, size := s.extra[alias], s.pageSize
	s.mu.Unlock()
	if len(extra) == 0 {
		return page
	}
	if size <= 0 {
		size = blobhub.DefaultPageSize
	}
	since, _ := blobhub.ParseTime(q.CreatedSince)
	before, _ := blobhub.ParseTime(q.CreatedBefore)
	at := func(it blobhub.Item) time.Time { t, _ := blobhub.ParseTime(it.CreatedAt); return t }
	out := slices.Clone(page)
	for _, it := range extra {
		t := at(it)
		if (q.CreatedSince == "" || t.After(since)) && (q.CreatedBefore == "" || t.Before(before)) {
			out = append(out, it)
		}
	}
	slices.SortStableFunc(out, func(a, b blobhub.Item) int {
		if q.Ascending {
			return at(a).Compare(at(b))
		}
		return at(b).Compare(at(a))
	})
	// A store page shorter than the page size holds every stored item the
	// bounds admit, so what sorts after its last item is all served; a full
	// one stops at its last item, as the server's own page would.
	if len(page) == size {
		last := at(page[len(page)-1])
		out = slices.DeleteFunc(out, func(it blobhub.Item) bool {
			if q.Ascending {
				return at(it).After(last)
			}
			return at(it).Before(last)
		})
	}
	if len(out) > size {
		out = out[:size]
	}
	return out
}

// RewriteAnswers passes the body of every later successful answer of
// command through fn before it is sent (nil turns it off): a server that
// answers in another shape than the one bhw-run expects.
func (s *Server) RewriteAnswers(command string, fn func(body []byte) []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rewrite == nil {
		s.rewrite = map[string]func([]byte) []byte{}
	}
	s.rewrite[command] = fn
}

// EventsPageCap makes list_session_events answer at most n events a page
// whatever limit it is asked (0 turns it off): a server whose pages are
// smaller than asked, so a backlog takes many pages.
func (s *Server) EventsPageCap(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.eventsCap = n
}

// ClockOffset makes the server's clock, which stamps items, objects and
// events, run d ahead of the host's (behind for a negative d).
func (s *Server) ClockOffset(d time.Duration) { s.store.SetClockOffset(d) }

// Events reads the whole feed of the default session, oldest first.
func (s *Server) Events() []blobhub.Event {
	s.t.Helper()
	var out []blobhub.Event
	q := blobhub.EventQuery{Ascending: true, Limit: blobhub.MaxListLimit}
	for {
		p, err := s.store.ListEvents(s.t.Context(), SessionID, q)
		if err != nil {
			s.t.Fatalf("bhtest: events: %v", err)
		}
		out = append(out, p.Events...)
		if p.Cursor == "" {
			return out
		}
		q.Cursor = p.Cursor
	}
}

// EqualTimestamps makes new items share the session's last created_at.
func (s *Server) EqualTimestamps(on bool) { s.store.SetEqualTimestamps(on) }

// FailNext answers the next n requests of command ("" = any) with status
// and, if retryAfter is not empty, a Retry-After header, without acting.
func (s *Server) FailNext(command string, n, status int, retryAfter string) {
	s.addFault(&fault{kind: faultStatus, command: command, n: n, status: status, retryAfter: retryAfter})
}

// TruncateNext acts on the next n requests of command ("" = any), then
// answers with the first half of the JSON body (a short, well-framed body).
func (s *Server) TruncateNext(command string, n int) {
	s.addFault(&fault{kind: faultTruncate, command: command, n: n})
}

// DropBefore closes the connection of the next n requests of command
// ("" = any) without acting or answering.
func (s *Server) DropBefore(command string, n int) {
	s.addFault(&fault{kind: faultDropBefore, command: command, n: n})
}

// DropAfterStore makes the next n posts store their item, then close the
// connection without answering.
func (s *Server) DropAfterStore(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropStored += n
}

// SlowBody makes every answer send half its body, wait d, then the rest
// (0 turns it off).
func (s *Server) SlowBody(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.slow = d
}

func (s *Server) addFault(f *fault) {
	if f.n <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, f)
}

// take consumes the first fault of kind matching command.
func (s *Server) take(kind faultKind, command string) *fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.faults {
		if f.kind != kind || f.command != "" && f.command != command {
			continue
		}
		c := *f
		f.n--
		if f.n == 0 {
			s.faults = append(s.faults[:i], s.faults[i+1:]...)
		}
		return &c
	}
	return nil
}

func (s *Server) record(command string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count++
	s.commands = append(s.commands, command)
}

// PostAs stores an item as user directly in the store.
func (s *Server) PostAs(userID, sessionID, alias string, p blobhub.NewItem) blobhub.Item {
	s.t.Helper()
	it, err := s.store.Post(s.t.Context(), sessionID, userID, alias, p)
	if err != nil {
		s.t.Fatalf("bhtest: post to %q: %v", alias, err)
	}
	return it
}

// PostAt stores a person's text item in the default session stamped
// createdAt instead of the store's clock, as a server whose clock jumped
// for one item would: the thread file is then out of created_at order.
func (s *Server) PostAt(alias, createdAt, text string) blobhub.Item {
	s.t.Helper()
	it, err := s.store.PostAt(s.t.Context(), SessionID, PersonUserID, alias, blobhub.NewItem{Content: []blobhub.Block{{Type: "text", Text: text}}}, createdAt)
	if err != nil {
		s.t.Fatalf("bhtest: post to %q at %s: %v", alias, createdAt, err)
	}
	return it
}

// PersonPost stores a person's text item in the default session.
func (s *Server) PersonPost(alias, text string) blobhub.Item {
	s.t.Helper()
	return s.PostAs(PersonUserID, SessionID, alias, blobhub.NewItem{Content: []blobhub.Block{{Type: "text", Text: text}}})
}

// Items reads every item of alias in the default session, unpaged.
func (s *Server) Items(alias string) []blobhub.Item {
	s.t.Helper()
	items, err := s.store.AllItems(s.t.Context(), SessionID, alias)
	if err != nil {
		s.t.Fatalf("bhtest: items of %q: %v", alias, err)
	}
	return items
}

// Put stores an object in the default session.
func (s *Server) Put(alias string, value string) {
	s.t.Helper()
	if err := s.store.Upload(s.t.Context(), SessionID, alias, json.RawMessage(value)); err != nil {
		s.t.Fatalf("bhtest: put %q: %v", alias, err)
	}
}

// Thread stores an empty thread envelope (no agent block, no instance:
// not a job) under alias in the default session, so items can be posted
// to it and listed.
func (s *Server) Thread(alias string) {
	s.t.Helper()
	s.Put(alias, `{"type":"thread","thread":{"attributes":{},"metadata":{}}}`)
}

// Delete removes an object of the default session and its items, as a
// person deleting a thread in BlobHub would: posts to it and lists of it
// are then answered invalid_thread_envelope.
func (s *Server) Delete(alias string) {
	s.t.Helper()
	if err := s.store.Delete(s.t.Context(), SessionID, alias); err != nil {
		s.t.Fatalf("bhtest: delete %q: %v", alias, err)
	}
}

// Get reads an object of the default session; ok is false when absent.
func (s *Server) Get(alias string) (blobhub.Object, bool) {
	s.t.Helper()
	o, err := s.store.Download(s.t.Context(), SessionID, alias)
	if errors.Is(err, blobhub.ErrNotFound) {
		return o, false
	}
	if err != nil {
		s.t.Fatalf("bhtest: get %q: %v", alias, err)
	}
	return o, true
}

func (s *Server) user(r *http.Request) (blobhub.User, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.keys[r.Header.Get("X-API-Key")]
	return u, ok
}

// gate applies the faults that come before acting; false when the request
// has been answered (or dropped) already.
func (s *Server) gate(w http.ResponseWriter, r *http.Request, command string) bool {
	if f := s.take(faultDropBefore, command); f != nil {
		hangUp(w)
		return false
	}
	if f := s.take(faultStatus, command); f != nil {
		if f.retryAfter != "" {
			w.Header().Set("Retry-After", f.retryAfter)
		}
		writeError(w, f.status, "injected", fmt.Sprintf("injected failure %d", f.status))
		return false
	}
	if _, ok := s.user(r); !ok {
		writeError(w, http.StatusUnauthorized, "unauthorized", "invalid API key")
		return false
	}
	return true
}

func hangUp(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // closes the connection just the same
	}
	conn.Close()
}

func (s *Server) me(w http.ResponseWriter, r *http.Request) {
	s.record(CmdMe)
	if !s.gate(w, r, CmdMe) {
		return
	}
	u, _ := s.user(r)
	s.answer(w, r, CmdMe, http.StatusOK, map[string]any{"user": map[string]any{"id": u.UserID, "name": u.Name, "email": u.Email}})
}

// blob answers the one blob the server knows, a workflow blob whose
// default revision is RevisionID.
func (s *Server) blob(w http.ResponseWriter, r *http.Request) {
	if !s.blobGate(w, r, cmdBlob) {
		return
	}
	s.answer(w, r, cmdBlob, http.StatusOK, map[string]any{"blob": map[string]any{
		"id": BlobID, "org_id": OrgID, "alias": "test-blob", "type": "workflow", "visibility": "private",
		"status": "ready", "default_revision_id": RevisionID,
	}})
}

// revision resolves RevisionID, by its id or as "default".
func (s *Server) revision(w http.ResponseWriter, r *http.Request) {
	if !s.blobGate(w, r, cmdRevision) {
		return
	}
	if ref := r.PathValue("ref"); ref != RevisionID && ref != "default" {
		writeError(w, http.StatusNotFound, "revision_not_found", "the blob has no revision "+ref)
		return
	}
	s.answer(w, r, cmdRevision, http.StatusOK, map[string]any{"revision": map[string]any{
		"id": RevisionID, "blob_id": BlobID, "phase": "draft", "status": "ready",
	}})
}

// blobGate records and gates a read of the blob; false when it has been
// answered already (another blob is refused, as the API refuses one the
// key may not read).
func (s *Server) blobGate(w http.ResponseWriter, r *http.Request, command string) bool {
	s.record(command)
	if !s.gate(w, r, command) {
		return false
	}
	if r.PathValue("org") != OrgID || r.PathValue("blob") != BlobID {
		writeError(w, http.StatusForbidden, "forbidden", "no such blob, or not readable with this key")
		return false
	}
	return true
}

// The request log's names of the two blob reads.
const (
	cmdBlob     = "get_blob"
	cmdRevision = "resolve_revision"
)

// channels: the commands each data channel serves.
var channels = map[string]bool{ // command name → it writes
	"download_session_file":     false,
	"download_session_object":   false,
	"list_session_objects":      false,
	"list_session_thread_items": false,
	"list_session_events":       false,
	"get_session":               false,
	"upload_session_object":     true,
	"delete_session_object":     true,
	"post_session_thread_item":  true,
}

// request is every argument a data command may carry; any other key is
// refused, as the API refuses it.
type request struct {
	Command       string          `json:"command"`
	SessionID     string          `json:"session_id"`
	Alias         *string         `json:"alias"`
	Value         json.RawMessage `json:"value"`
	Content       []blobhub.Block `json:"content"`
	Metadata      json.RawMessage `json:"metadata"`
	ParentID      string          `json:"parent_id"`
	Ascending     *bool           `json:"ascending"`
	CreatedSince  string          `json:"created_since"`
	CreatedBefore string          `json:"created_before"`
	Prefix        string          `json:"prefix"`
	Cursor        *string         `json:"cursor"`
	Limit         *int            `json:"limit"`
}

// data serves one data command on its channel (write: data/command): the
// request read and checked as the API checks it, then the command's own
// step.
func (s *Server) data(w http.ResponseWriter, r *http.Request, write bool) {
	if write && strings.HasPrefix(r.Header.Get("Content-Type"), "application/octet-stream") {
		s.uploadFile(w, r)
		return
	}
	var req request
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<20))
	dec.DisallowUnknownFields()
	decErr := dec.Decode(&req)
	s.record(req.Command)
	if !s.gate(w, r, req.Command) {
		return
	}
	if !checkRequest(w, r, req, decErr, write) {
		return
	}
	c := s.newCall(w, r, req)
	switch req.Command {
	case "get_session":
		s.getSession(c)
	case "download_session_object":
		s.downloadObject(c)
	case "upload_session_object":
		s.uploadObject(c)
	case "delete_session_object":
		s.deleteObject(c)
	case "list_session_objects":
		s.listObjects(c)
	case "download_session_file":
		if c.needAlias() {
			s.downloadFile(w, r, req.SessionID, c.alias)
		}
	case "post_session_thread_item":
		s.postItem(c)
	case "list_session_thread_items":
		s.listItems(c)
	case "list_session_events":
		s.listEvents(c)
	default:
		writeError(w, http.StatusBadRequest, "unknown_command", fmt.Sprintf("unknown command %q", req.Command))
	}
}

// checkRequest refuses, as the API does, a body that is not a command of
// this channel or carries an argument out of its range; false when it has
// answered.
func checkRequest(w http.ResponseWriter, r *http.Request, req request, decErr error, write bool) bool {
	writes, known := channels[req.Command]
	switch {
	case decErr != nil:
		writeError(w, http.StatusBadRequest, "invalid_request_body", "the body is not a command this API takes: "+decErr.Error())
	case !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json"):
		writeError(w, http.StatusUnsupportedMediaType, "invalid_request_body", "Content-Type must be application/json")
	case !known:
		writeError(w, http.StatusBadRequest, "unknown_command", fmt.Sprintf("unknown command %q", req.Command))
	case writes != write:
		writeError(w, http.StatusBadRequest, "unknown_command", fmt.Sprintf("command %q is not served on this channel", req.Command))
	case req.Cursor != nil && *req.Cursor == "":
		writeError(w, http.StatusBadRequest, "invalid_request_body", "cursor must be a non-empty string")
	case req.Limit != nil && (*req.Limit < 1 || *req.Limit > blobhub.MaxListLimit):
		writeError(w, http.StatusBadRequest, "invalid_request_body", fmt.Sprintf("limit must be 1..%d", blobhub.MaxListLimit))
	case req.SessionID == "":
		writeError(w, http.StatusBadRequest, "invalid_request_body", "session_id is required")
	case r.PathValue("revision") == "default":
		// As the API: only the revision route resolves default.
		writeError(w, http.StatusNotFound, "revision_not_found", "data commands take a revision id; resolve default first")
	default:
		return true
	}
	return false
}

// call is one checked data command: the request with its defaults, and
// where its answer goes.
type call struct {
	w     http.ResponseWriter
	r     *http.Request
	req   request
	ctx   context.Context
	alias string // "" when the request names none
	limit int    // the page size asked, or the API's default
	user  blobhub.User
}

func (s *Server) newCall(w http.ResponseWriter, r *http.Request, req request) *call {
	c := &call{w: w, r: r, req: req, ctx: r.Context(), limit: blobhub.DefaultListLimit}
	if req.Limit != nil {
		c.limit = *req.Limit
	}
	if req.Alias != nil {
		c.alias = *req.Alias
	}
	c.user, _ = s.user(r)
	return c
}

// needAlias refuses a command that names no alias; false when it has
// answered.
func (c *call) needAlias() bool {
	if c.req.Alias == nil {
		writeError(c.w, http.StatusBadRequest, "invalid_request", "alias is required")
		return false
	}
	return true
}

// reply answers the command with v.
func (s *Server) reply(c *call, v map[string]any) {
	s.answer(c.w, c.r, c.req.Command, http.StatusOK, v)
}

func (s *Server) getSession(c *call) {
	if c.req.SessionID != SessionID && c.req.SessionID != SessionAlias {
		writeError(c.w, http.StatusOK, "not_found", "no session "+c.req.SessionID)
		return
	}
	s.reply(c, map[string]any{"session": map[string]any{
		"id": SessionID, "alias": SessionAlias, "status": "open",
	}})
}

func (s *Server) downloadObject(c *call) {
	if !c.needAlias() {
		return
	}
	o, err := s.store.Download(c.ctx, c.req.SessionID, c.alias)
	if errors.Is(err, blobhub.ErrNotFound) {
		// The API answers an object that does not exist as one the
		// key may not read.
		writeError(c.w, http.StatusForbidden, "forbidden", fmt.Sprintf("session object %q does not exist, or is not readable with this key", c.alias))
		return
	}
	if err != nil {
		writeStoreError(c.w, err)
		return
	}
	s.reply(c, map[string]any{"object": map[string]any{
		"revision_id": c.r.PathValue("revision"), "session_id": c.req.SessionID, "alias": o.Alias, "updated_at": o.UpdatedAt, "value": o.Value,
	}})
}

func (s *Server) uploadObject(c *call) {
	if !c.needAlias() {
		return
	}
	if err := s.store.Upload(c.ctx, c.req.SessionID, c.alias, c.req.Value); err != nil {
		writeStoreError(c.w, err)
		return
	}
	s.reply(c, map[string]any{})
}

func (s *Server) deleteObject(c *call) {
	if !c.needAlias() {
		return
	}
	if err := s.store.Delete(c.ctx, c.req.SessionID, c.alias); err != nil {
		writeStoreError(c.w, err)
		return
	}
	s.reply(c, map[string]any{})
}

// listObjects answers a page of the objects under the request's prefix,
// in alias order.
func (s *Server) listObjects(c *call) {
	objs, err := s.store.Objects(c.ctx, c.req.SessionID)
	if err != nil {
		writeStoreError(c.w, err)
		return
	}
	objs = slices.DeleteFunc(objs, func(o blobhub.ObjectInfo) bool { return !strings.HasPrefix(o.Alias, c.req.Prefix) })
	slices.SortFunc(objs, func(a, b blobhub.ObjectInfo) int { return strings.Compare(a.Alias, b.Alias) })
	// The cursor is the last alias of the page before (opaque to a
	// client): the next page starts after it.
	if c.req.Cursor != nil {
		i, _ := slices.BinarySearchFunc(objs, *c.req.Cursor, func(o blobhub.ObjectInfo, a string) int { return strings.Compare(o.Alias, a) })
		if i < len(objs) && objs[i].Alias == *c.req.Cursor {
			i++
		}
		objs = objs[i:]
	}
	var next any // null on the last page
	if len(objs) > c.limit {
		objs = objs[:c.limit]
		next = objs[c.limit-1].Alias
	}
	s.reply(c, map[string]any{"objects": objs, "cursor": next})
}

// postItem stores the item as the key's user, and hangs up after storing
// it when DropAfterStore says so.
func (s *Server) postItem(c *call) {
	if !c.needAlias() {
		return
	}
	it, err := s.store.Post(c.ctx, c.req.SessionID, c.user.UserID, c.alias, blobhub.NewItem{Content: c.req.Content, Metadata: c.req.Metadata, ParentID: c.req.ParentID})
	if err != nil {
		writeStoreError(c.w, err)
		return
	}
	if s.takeDropStored() {
		hangUp(c.w)
		return
	}
	s.reply(c, map[string]any{"item": it})
}

// listItems answers a page of a thread's items: the ones a test made up
// (EndlessList), or the store's with the ones a test serves (ServeItem).
func (s *Server) listItems(c *call) {
	if !c.needAlias() {
		return
	}
	if !s.gaveOut(c.w, "created_since", c.req.CreatedSince) {
		return
	}
	q := blobhub.ItemQuery{CreatedSince: c.req.CreatedSince, CreatedBefore: c.req.CreatedBefore}
	if c.req.Ascending != nil {
		q.Ascending = *c.req.Ascending // BlobHub's default is descending
	}
	if c.req.Cursor != nil {
		// The cursor is the created_at of the page before's last item
		// (opaque to a client): the next page is past it.
		if q.Ascending {
			q.CreatedSince = *c.req.Cursor
		} else {
			q.CreatedBefore = *c.req.Cursor
		}
	}
	if items, ok := s.madeUp(c.ctx, c.alias, q); ok {
		s.reply(c, map[string]any{"items": items, "cursor": nil})
		return
	}
	items, err := s.store.ListItems(c.ctx, c.req.SessionID, c.alias, q)
	if err != nil {
		writeStoreError(c.w, err)
		return
	}
	items = s.withServed(c.alias, q, items)
	var next any // null on the last page
	if len(items) >= c.limit {
		items = items[:c.limit]
		next = items[c.limit-1].CreatedAt
	}
	s.reply(c, map[string]any{"items": items, "cursor": next})
}

// listEvents answers a page of the session's events, no larger than
// EventsPageCap allows.
func (s *Server) listEvents(c *call) {
	if !s.gaveOut(c.w, "created_since", c.req.CreatedSince) {
		return
	}
	q := blobhub.EventQuery{CreatedSince: c.req.CreatedSince, CreatedBefore: c.req.CreatedBefore, Limit: c.limit}
	if c.req.Ascending != nil {
		q.Ascending = *c.req.Ascending // descending by default, as the other lists
	}
	if c.req.Cursor != nil {
		q.Cursor = *c.req.Cursor
	}
	s.mu.Lock()
	if s.eventsCap > 0 && q.Limit > s.eventsCap {
		q.Limit = s.eventsCap
	}
	s.mu.Unlock()
	p, err := s.store.ListEvents(c.ctx, c.req.SessionID, q)
	if err != nil {
		writeStoreError(c.w, err)
		return
	}
	var next any // null on the last page
	if p.Cursor != "" {
		next = p.Cursor
	}
	s.reply(c, map[string]any{"session_events": p.Events, "cursor": next})
}

func (s *Server) takeDropStored() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dropStored > 0 {
		s.dropStored--
		return true
	}
	return false
}

// answer writes v as a success envelope ("status": "success" beside v's
// keys), truncated or slowed when a switch says so.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, command string, status int, v map[string]any) {
	v["status"] = "success"
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	s.mu.Lock()
	slow, rewrite := s.slow, s.rewrite[command]
	s.mu.Unlock()
	if rewrite != nil && status/100 == 2 {
		b = rewrite(b)
	}
	s.remember(b)
	if s.take(faultTruncate, command) != nil {
		b = b[:len(b)/2]
	}
	w.Header().Set("Content-Type", "application/json")
	// The server's clock, the one that stamps what it stores.
	w.Header().Set("Date", s.store.Now().UTC().Format(http.TimeFormat))
	if slow <= 0 {
		w.WriteHeader(status)
		w.Write(b)
		return
	}
	w.WriteHeader(status)
	half := len(b) / 2
	w.Write(b[:half])
	http.NewResponseController(w).Flush()
	t := time.NewTimer(slow)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
		return
	}
	w.Write(b[half:])
}

// remember records every created_at in an answer's body: the times a
// client may send back as a list's bound.
func (s *Server) remember(body []byte) {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gave == nil {
		s.gave = map[string]bool{}
	}
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if at, ok := e.(string); ok && k == "created_at" {
					s.gave[at] = true
				}
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(v)
}

// gaveOut refuses a list bound that is not a created_at this server gave
// out, spelled as it spelled it: BlobHub's clients send back only the
// server's own times (blobhub-worker does), never one they computed. It
// answers the refusal and reports false.
func (s *Server) gaveOut(w http.ResponseWriter, field, at string) bool {
	if at == "" {
		return true
	}
	s.mu.Lock()
	ok := s.gave[at]
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("%s %q is not a created_at this server gave out", field, at))
	}
	return ok
}

func writeStoreError(w http.ResponseWriter, err error) {
	var ae *blobhub.APIError
	if errors.As(err, &ae) {
		writeError(w, ae.Status, ae.Code, ae.Message)
		return
	}
	fmt.Fprintf(os.Stderr, "bhtest: store: %v\n", err)
	writeError(w, http.StatusInternalServerError, "internal", err.Error())
}

// writeError writes the failure envelope: the error code and a message.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"status": "failure", "error": code, "message": strings.TrimSpace(msg)})
}
