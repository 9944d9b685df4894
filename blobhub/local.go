package blobhub

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/gofrs/flock"

	"github.com/blobhub/bhw-run/statefile"
)

// LocalStore is the file:// store, for use without a BlobHub account: the
// session operations served
// from a directory a person can read:
//
//	<dir>/sessions/<session>/objects/<alias>.json   {alias, updated_at, value}
//	<dir>/sessions/<session>/items/<alias>.jsonl    one item per line, append-only
//	<dir>/sessions/<session>/session.lock           flock around every write
//	<dir>/sessions/<session>/clock                  the last created_at stamped
//	<dir>/sessions/<session>/events.jsonl           the change feed, append-only
//
// Names are encoded by aliasFileName. Objects are written atomically; items
// get unique ids and strictly increasing created_at across the session, also
// with several processes writing at once. Its errors are *APIError for what
// BlobHub would answer (404, 400, 413) and plain errors for I/O.
type LocalStore struct {
	dir      string
	pageSize atomic.Int64
	equalTS  atomic.Bool
	offset   atomic.Int64 // the store clock's lead on the host's, in ns
}

// ObjectInfo is one entry of a session's object listing.
type ObjectInfo struct {
	Alias     string `json:"alias"`
	UpdatedAt string `json:"updated_at"`
}

// OpenLocalStore serves dir, which need not exist yet: a session's directory
// is made on its first write.
func OpenLocalStore(dir string) *LocalStore {
	s := &LocalStore{dir: dir}
	s.pageSize.Store(DefaultPageSize)
	return s
}

// Dir is the store's root.
func (s *LocalStore) Dir() string { return s.dir }

// SetPageSize sets how many items one ListItems call returns at most.
func (s *LocalStore) SetPageSize(n int) {
	if n <= 0 {
		n = DefaultPageSize
	}
	s.pageSize.Store(int64(n))
}

// SetEqualTimestamps makes every new item reuse the last created_at of its
// session (a test switch: several items share one instant).
func (s *LocalStore) SetEqualTimestamps(on bool) { s.equalTS.Store(on) }

func (s *LocalStore) sessionDir(sessionID string) (string, error) {
	if sessionID == "" {
		return "", &APIError{Status: http.StatusBadRequest, Code: "invalid_request", Message: "session_id is required"}
	}
	return filepath.Join(s.dir, "sessions", aliasFileName(sessionID)), nil
}

func checkAlias(alias string) error {
	if alias == "" || len(alias) > 1024 || !utf8.ValidString(alias) || strings.ContainsRune(alias, 0) {
		return &APIError{Status: http.StatusBadRequest, Code: "invalid_alias", Message: "alias must be 1..1024 bytes of UTF-8 without NUL"}
	}
	return nil
}

func notFound(what string) error {
	return &APIError{Status: http.StatusNotFound, Code: CodeNotFound, Message: what + " not found"}
}

// StatusInvalidThreadEnvelope is the status the store (and so the test hub)
// answers invalid_thread_envelope with. A guess: BlobHub's documentation
// names the code of post_session_thread_item and list_session_thread_items
// for an alias that does not exist or is not a thread, not its status; 400
// is what its other invalid_* answers of a bad request would come with.
// The client recognises the code whatever the status.
const StatusInvalidThreadEnvelope = http.StatusBadRequest

// checkThread answers like BlobHub's post and list of items do for an
// alias that is absent or whose value is not a thread.
func (s *LocalStore) checkThread(ctx context.Context, sessionID, alias string) error {
	if typ, ok := s.objectType(sessionID, alias); ok {
		if typ != "thread" {
			return &APIError{Status: StatusInvalidThreadEnvelope, Code: CodeInvalidThreadEnvelope, Message: fmt.Sprintf("session object %q is not a thread (value.type %q)", alias, typ)}
		}
		return nil
	}
	o, err := s.Download(ctx, sessionID, alias)
	if errors.Is(err, ErrNotFound) {
		return &APIError{Status: StatusInvalidThreadEnvelope, Code: CodeInvalidThreadEnvelope, Message: fmt.Sprintf("session object %q does not exist", alias)}
	}
	if err != nil {
		return err
	}
	var v struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(o.Value, &v) != nil || v.Type != "thread" {
		return &APIError{Status: StatusInvalidThreadEnvelope, Code: CodeInvalidThreadEnvelope, Message: fmt.Sprintf("session object %q is not a thread (value.type %q)", alias, v.Type)}
	}
	return nil
}

type objectFile struct {
	Alias     string `json:"alias"`
	UpdatedAt string `json:"updated_at"`
	// Type is value's type, written before it, so that a check of the
	// type (every list of a thread's items) reads a few bytes, not the
	// whole value. A file of an earlier version has none.
	Type  string          `json:"type,omitempty"`
	Value json.RawMessage `json:"value"`
}

// objectType reads the type an object's file records ahead of its value,
// without reading the value; ok is false when it cannot tell (no such
// file, a file of an earlier version), and the caller reads the object.
func (s *LocalStore) objectType(sessionID, alias string) (typ string, ok bool) {
	sd, err := s.sessionDir(sessionID)
	if err != nil {
		return "", false
	}
	f, err := os.Open(filepath.Join(sd, "objects", aliasFileName(alias)+".json"))
	if err != nil {
		return "", false
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", false
	}
	var name string
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return "", false
		}
		var v string
		switch key {
		case "alias", "updated_at", "type":
			if dec.Decode(&v) != nil {
				return "", false
			}
		default: // the value, or a key of a later version: read the object
			return "", false
		}
		switch key {
		case "alias":
			name = v
		case "type":
			// Only a hashed name can collide (see Download).
			return v, name == alias && v != ""
		}
	}
	return "", false
}

// Download reads an object; the RevisionID of the answer is left empty.
func (s *LocalStore) Download(ctx context.Context, sessionID, alias string) (Object, error) {
	if err := checkAlias(alias); err != nil {
		return Object{}, err
	}
	sd, err := s.sessionDir(sessionID)
	if err != nil {
		return Object{}, err
	}
	path := filepath.Join(sd, "objects", aliasFileName(alias)+".json")
	if limit := maxValue(ctx); limit > 0 {
		if fi, err := os.Stat(path); err == nil && fi.Size() > limit+answerSlack {
			return Object{}, &TooLargeError{Size: fi.Size(), Max: limit}
		}
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Object{}, notFound("object")
	}
	if err != nil {
		return Object{}, err
	}
	var f objectFile
	if err := json.Unmarshal(b, &f); err != nil {
		return Object{}, fmt.Errorf("local store: object file of %q is not JSON: %w; repair or remove it", alias, err)
	}
	if f.Alias != alias {
		// Only a hashed name can collide, and only with a SHA-256 collision.
		return Object{}, notFound("object")
	}
	var v bytes.Buffer
	if err := json.Compact(&v, f.Value); err != nil {
		return Object{}, err
	}
	if limit := maxValue(ctx); limit > 0 && int64(v.Len()) > limit {
		return Object{}, &TooLargeError{Size: int64(v.Len()), Max: limit}
	}
	return Object{SessionID: sessionID, Alias: alias, UpdatedAt: f.UpdatedAt, Value: v.Bytes()}, nil
}

// checkValue insists on a JSON object carrying a string "type", as BlobHub
// does, and returns the type.
func checkValue(value json.RawMessage) (string, error) {
	var probe struct {
		Type *string `json:"type"`
	}
	if !json.Valid(value) || json.Unmarshal(value, &probe) != nil || probe.Type == nil || *probe.Type == "" || bytes.TrimSpace(value)[0] != '{' {
		return "", &APIError{Status: http.StatusBadRequest, Code: "invalid_value", Message: `value must be a JSON object carrying a "type"`}
	}
	return *probe.Type, nil
}

// Upload replaces an object atomically.
func (s *LocalStore) Upload(ctx context.Context, sessionID, alias string, value json.RawMessage) error {
	if err := checkAlias(alias); err != nil {
		return err
	}
	typ, err := checkValue(value)
	if err != nil {
		return err
	}
	sd, err := s.sessionDir(sessionID)
	if err != nil {
		return err
	}
	dir := filepath.Join(sd, "objects")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, value); err != nil {
		return err
	}
	b, err := json.MarshalIndent(objectFile{Alias: alias, UpdatedAt: FormatTime(s.Now()), Type: typ, Value: compact.Bytes()}, "", "  ")
	if err != nil {
		return err
	}
	// The write and its event under the session lock, so the feed's order
	// is the order of the writes.
	return withSessionLock(sd, func() error {
		// The temp file's name starts with '.', which no encoded alias does.
		if err := statefile.WriteAtomic(filepath.Join(dir, aliasFileName(alias)+".json"), append(b, '\n'), 0o600); err != nil {
			return err
		}
		return s.appendEvent(sd, EventObjectModified, alias, typ, "")
	})
}

// Delete removes an object and, as BlobHub's deletion of a thread
// envelope does, its items; an absent object is not_found.
func (s *LocalStore) Delete(ctx context.Context, sessionID, alias string) error {
	if err := checkAlias(alias); err != nil {
		return err
	}
	sd, err := s.sessionDir(sessionID)
	if err != nil {
		return err
	}
	if _, err := os.Stat(sd); errors.Is(err, fs.ErrNotExist) {
		return notFound("object")
	}
	return withSessionLock(sd, func() error {
		typ, _ := s.objectType(sessionID, alias)
		err := os.Remove(filepath.Join(sd, "objects", aliasFileName(alias)+".json"))
		if errors.Is(err, fs.ErrNotExist) {
			return notFound("object")
		}
		if err != nil {
			return err
		}
		if err := os.Remove(filepath.Join(sd, "items", aliasFileName(alias)+".jsonl")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return s.appendEvent(sd, EventObjectDeleted, alias, typ, "")
	})
}

// Objects lists a session's objects by alias. A session never written is
// not found, like a wrong session on BlobHub.
func (s *LocalStore) Objects(ctx context.Context, sessionID string) ([]ObjectInfo, error) {
	sd, err := s.sessionDir(sessionID)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(sd); errors.Is(err, fs.ErrNotExist) {
		return nil, notFound("session")
	}
	dir := filepath.Join(sd, "objects")
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return []ObjectInfo{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := []ObjectInfo{}
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || strings.HasPrefix(name, ".") || !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed meanwhile
			}
			return nil, err
		}
		var f objectFile
		if json.Unmarshal(b, &f) != nil || aliasFileName(f.Alias) != name {
			continue // not ours: a person's stray file
		}
		out = append(out, ObjectInfo{Alias: f.Alias, UpdatedAt: f.UpdatedAt})
	}
	slices.SortFunc(out, func(a, b ObjectInfo) int { return strings.Compare(a.Alias, b.Alias) })
	return out, nil
}

func checkItem(p NewItem) error {
	bad := func(msg string) error {
		return &APIError{Status: http.StatusBadRequest, Code: "invalid_item", Message: msg}
	}
	if len(p.Content) == 0 {
		return bad("content must hold at least one block")
	}
	for _, b := range p.Content {
		switch b.Type {
		case "text":
		case "json":
			if !json.Valid(b.JSON) {
				return bad("a json block must carry valid json")
			}
		case "file":
			if b.File == nil || b.File.Alias == "" {
				return bad("a file block must carry file.alias")
			}
		default:
			return bad(fmt.Sprintf("content block type %q is not text, json or file", b.Type))
		}
	}
	if len(p.Metadata) > 0 && !json.Valid(p.Metadata) {
		return bad("metadata must be JSON")
	}
	return nil
}

// checkStoredSize refuses an item as BlobHub does: measured as stored,
// wrapped with its id, session, alias, stamp and author, at MaxItemBytes
// or more.
func checkStoredSize(sessionID, alias string, it Item) error {
	n := EncodedSize(struct {
		Item
		SessionID  string `json:"session_id"`
		RevisionID string `json:"revision_id"`
		Alias      string `json:"alias"`
	}{it, sessionID, "rev_local", alias})
	if n < 0 || n >= MaxItemBytes {
		return &APIError{Status: http.StatusRequestEntityTooLarge, Code: CodeThreadItemTooLarge,
			Message: fmt.Sprintf("item is %d bytes as stored, the limit is under %d", n, MaxItemBytes)}
	}
	return nil
}

// Post appends an item stamped with a fresh id, the next created_at of the
// session and userID.
func (s *LocalStore) Post(ctx context.Context, sessionID, userID, alias string, p NewItem) (Item, error) {
	return s.post(ctx, sessionID, userID, alias, p, "")
}

// PostAt is Post with createdAt as the item's stamp, leaving the session's
// clock as it is: a clock that jumped for one item (a test switch).
func (s *LocalStore) PostAt(ctx context.Context, sessionID, userID, alias string, p NewItem, createdAt string) (Item, error) {
	t, err := ParseTime(createdAt)
	if err != nil {
		return Item{}, err
	}
	return s.post(ctx, sessionID, userID, alias, p, FormatTime(t))
}

func (s *LocalStore) post(ctx context.Context, sessionID, userID, alias string, p NewItem, at string) (Item, error) {
	if err := checkAlias(alias); err != nil {
		return Item{}, err
	}
	if err := checkItem(p); err != nil {
		return Item{}, err
	}
	// Measured before it is stamped: an id and a stamp as long as those
	// it gets.
	if err := checkStoredSize(sessionID, alias, Item{ID: "itm_00000000000000000000", CreatedAt: FormatTime(time.Now()),
		UserID: userID, Content: p.Content, Metadata: compactRaw(p.Metadata), ParentID: p.ParentID}); err != nil {
		return Item{}, err
	}
	if err := ctx.Err(); err != nil {
		return Item{}, err
	}
	if err := s.checkThread(ctx, sessionID, alias); err != nil {
		return Item{}, err
	}
	sd, err := s.sessionDir(sessionID)
	if err != nil {
		return Item{}, err
	}
	if err := os.MkdirAll(filepath.Join(sd, "items"), 0o700); err != nil {
		return Item{}, err
	}
	// One flock per session serializes the stamp and the append across
	// goroutines and processes: each Flock opens its own descriptor, and
	// flock(2) locks conflict between descriptors even in one process.
	lk := flock.New(filepath.Join(sd, "session.lock"), flock.SetPermissions(0o600))
	if err := lk.Lock(); err != nil {
		return Item{}, fmt.Errorf("local store: lock session: %w", err)
	}
	defer lk.Close()

	stamp := at
	if stamp == "" {
		if stamp, err = s.nextStamp(filepath.Join(sd, "clock")); err != nil {
			return Item{}, err
		}
	}
	var id [10]byte
	if _, err := rand.Read(id[:]); err != nil {
		return Item{}, err
	}
	it := Item{
		ID:        "itm_" + hex.EncodeToString(id[:]),
		CreatedAt: stamp,
		UserID:    userID,
		Content:   p.Content,
		Metadata:  compactRaw(p.Metadata),
		ParentID:  p.ParentID,
	}
	line, err := json.Marshal(it)
	if err != nil {
		return Item{}, err
	}
	if err := appendLine(filepath.Join(sd, "items", aliasFileName(alias)+".jsonl"), line); err != nil {
		return Item{}, err
	}
	// The feed's stamp is the store's clock, also for an item stamped
	// otherwise (PostAt), so the feed stays in created_at order.
	evStamp := ""
	if at == "" {
		evStamp = stamp
	}
	if err := s.appendEvent(sd, EventItemPosted, alias, "thread", evStamp); err != nil {
		return Item{}, err
	}
	return it, nil
}

func compactRaw(r json.RawMessage) json.RawMessage {
	if len(r) == 0 {
		return nil
	}
	var b bytes.Buffer
	if json.Compact(&b, r) != nil {
		return r
	}
	return b.Bytes()
}

// nextStamp returns max(now, last+1µs) (or last itself with equal
// timestamps on) and persists it, so created_at grows strictly even when the
// clock stalls or steps back. Called under the session lock.
func (s *LocalStore) nextStamp(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return "", err
	}
	next := s.Now().UTC().Truncate(time.Microsecond)
	if last := strings.TrimSpace(string(b)); last != "" {
		lt, err := ParseTime(last)
		if err != nil {
			return "", fmt.Errorf("local store: %s: %w; remove the file to reset the clock", path, err)
		}
		switch {
		case s.equalTS.Load():
			next = lt
		case !next.After(lt):
			next = lt.Add(time.Microsecond)
		}
	}
	stamp := FormatTime(next)
	// Fixed-length overwrite in place; fsync so a crash cannot bring back an
	// older stamp than an item already on disk.
	if _, err := f.WriteAt([]byte(stamp+"\n"), 0); err != nil {
		return "", err
	}
	if err := f.Truncate(int64(len(stamp) + 1)); err != nil {
		return "", err
	}
	if err := f.Sync(); err != nil {
		return "", err
	}
	return stamp, nil
}

// appendLine appends one line and fsyncs. A line torn by a crash is skipped
// by readers; a newline is added first so the next item starts clean.
func appendLine(path string, line []byte) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	buf := make([]byte, 0, len(line)+2)
	if st.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, st.Size()-1); err != nil {
			return err
		}
		if last[0] != '\n' {
			buf = append(buf, '\n')
		}
	}
	buf = append(buf, line...)
	buf = append(buf, '\n')
	if _, err := f.Write(buf); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}

// ItemsFile is the file that holds a thread's items. A benchmark that
// needs many threads with the same long history links one thread's file to
// the others instead of posting every item again.
func (s *LocalStore) ItemsFile(sessionID, alias string) (string, error) {
	if err := checkAlias(alias); err != nil {
		return "", err
	}
	sd, err := s.sessionDir(sessionID)
	if err != nil {
		return "", err
	}
	return filepath.Join(sd, "items", aliasFileName(alias)+".jsonl"), nil
}

// AllItems reads every item of a thread in stored order (no paging).
func (s *LocalStore) AllItems(ctx context.Context, sessionID, alias string) ([]Item, error) {
	return s.readItems(sessionID, alias, readAll)
}

// readItems opens a thread's file, has read read it and closes it; a file
// that does not exist yet holds no items.
func (s *LocalStore) readItems(sessionID, alias string, read func(f *os.File) ([]Item, error)) ([]Item, error) {
	path, err := s.ItemsFile(sessionID, alias)
	if err != nil {
		return nil, err
	}
	return readItemsFile(path, read)
}

// readItemsFile is readItems for the thread file at path.
func readItemsFile(path string, read func(f *os.File) ([]Item, error)) ([]Item, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return []Item{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return read(f)
}

// readAll decodes every item of a thread file, in file order.
func readAll(f *os.File) ([]Item, error) {
	items := []Item{}
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadBytes('\n')
		if it, ok := decodeItem(line); ok {
			items = append(items, it)
		}
		if err == io.EOF {
			return items, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// decodeItem reads one line of a thread file: blank lines, lines torn by a
// crash and anything else that is not an item with an id are skipped.
func decodeItem(line []byte) (Item, bool) {
	var it Item
	if len(bytes.TrimSpace(line)) == 0 || json.Unmarshal(line, &it) != nil || it.ID == "" {
		return Item{}, false
	}
	return it, true
}

// decodeListed is decodeItem for ListItems, which also skips an item whose
// created_at does not parse.
func decodeListed(line []byte) (Item, time.Time, bool) {
	it, ok := decodeItem(line)
	if !ok {
		return Item{}, time.Time{}, false
	}
	t, err := ParseTime(it.CreatedAt)
	if err != nil {
		return Item{}, time.Time{}, false
	}
	return it, t, true
}

// itemBounds is an ItemQuery's bounds, parsed; both strict.
type itemBounds struct {
	since, before       time.Time
	hasSince, hasBefore bool
}

func (b itemBounds) admits(t time.Time) bool {
	return (!b.hasSince || t.After(b.since)) && (!b.hasBefore || t.Before(b.before))
}

// ListItems answers one page, like BlobHub: bounds strict, at most the page
// size, oldest first when ascending, newest first otherwise. The page is the
// first (ascending) or last (descending) items of the file, in file order,
// that the bounds admit.
//
// Post appends under the session lock with a created_at that never goes
// back (strictly increasing; equal with EqualTimestamps on), so a thread
// file is sorted by created_at and a page costs O(log N) line reads to find
// where it starts plus O(page) to read it (listSorted). Where those reads
// meet an item older than one before it (a file edited by hand, a clock
// reset), ListItems reads the whole file instead (listLinear).
func (s *LocalStore) ListItems(ctx context.Context, sessionID, alias string, q ItemQuery) ([]Item, error) {
	var b itemBounds
	var err error
	if q.CreatedSince != "" {
		if b.since, err = ParseTime(q.CreatedSince); err != nil {
			return nil, &APIError{Status: http.StatusBadRequest, Code: "invalid_request", Message: "created_since: " + err.Error()}
		}
		b.hasSince = true
	}
	if q.CreatedBefore != "" {
		if b.before, err = ParseTime(q.CreatedBefore); err != nil {
			return nil, &APIError{Status: http.StatusBadRequest, Code: "invalid_request", Message: "created_before: " + err.Error()}
		}
		b.hasBefore = true
	}
	if err := s.checkThread(ctx, sessionID, alias); err != nil {
		return nil, err
	}
	return s.readItems(sessionID, alias, func(f *os.File) ([]Item, error) {
		st, err := f.Stat()
		if err != nil {
			return nil, err
		}
		n := int(s.pageSize.Load())
		page, err := listSorted(f, st.Size(), q.Ascending, b, n, decodeListed)
		if errors.Is(err, errUnsorted) {
			return listLinear(f, q.Ascending, b, n, decodeListed)
		}
		return page, err
	})
}

// lineDecoder reads one line of an append-only log (a thread's items, the
// session's events): the entry and its created_at; ok is false for a line
// readers skip (blank, torn by a crash, not an entry).
type lineDecoder[T any] func(line []byte) (T, time.Time, bool)

// errUnsorted: listSorted met items out of created_at order.
var errUnsorted = errors.New("local store: thread file out of created_at order")

// listLinear decodes every line of f and pages in file order.
func listLinear[T any](f *os.File, ascending bool, b itemBounds, n int, decode lineDecoder[T]) ([]T, error) {
	type entry struct {
		it T
		t  time.Time
	}
	var all []entry
	r := bufio.NewReader(io.NewSectionReader(f, 0, math.MaxInt64))
	for {
		line, err := r.ReadBytes('\n')
		if it, t, ok := decode(line); ok {
			all = append(all, entry{it, t})
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if !ascending {
		slices.Reverse(all)
	}
	page := []T{}
	for _, e := range all {
		if !b.admits(e.t) {
			continue
		}
		page = append(page, e.it)
		if len(page) == n {
			break
		}
	}
	return page, nil
}

// bisectSpan: the search for a page's start stops probing once the stretch
// left is this short and reads it through (a var for the tests).
var bisectSpan int64 = 16 << 10

// listSorted is ListItems for a file sorted by created_at (non-decreasing
// among the items ListItems serves; every other line is skipped wherever it
// is), size bytes long when it was looked at. An ascending page starts at the first item after created_since,
// found by bisecting byte offsets, and ends at the page size or the first
// item at or after created_before; a descending page is read backwards from
// the first item at or after created_before (bisected) or the end, down to
// created_since. Every item read is checked against its neighbours and the
// probes that placed it; errUnsorted when one is out of order, so the
// caller can read the whole file instead. Disorder in lines it never reads
// goes unseen: only a hand edit can put it there.
func listSorted[T any](f io.ReaderAt, size int64, ascending bool, b itemBounds, n int, decode lineDecoder[T]) ([]T, error) {
	at := func(line []byte) (time.Time, bool) { _, t, ok := decode(line); return t, ok }
	// The read goes one way from where the page starts. An item that goes
	// back against that way is out of order; one past the page's far bound
	// ends the page, and so would every later one.
	var sp span
	var err error
	var prev time.Time
	var hasPrev bool
	outOfOrder := func(t time.Time) bool { return t.Before(prev) }
	past := func(t time.Time) bool { return b.hasBefore && !t.Before(b.before) }
	if ascending {
		sp = span{hi: size}
		if b.hasSince {
			sp, err = bisect(f, size, at, func(t time.Time) bool { return t.After(b.since) })
		}
		prev, hasPrev = sp.loT, sp.hasLoT
	} else {
		outOfOrder = func(t time.Time) bool { return prev.Before(t) }
		past = func(t time.Time) bool { return b.hasSince && !t.After(b.since) }
		sp = span{lo: 0, hi: size}
		if b.hasBefore {
			sp, err = bisect(f, size, at, func(t time.Time) bool { return !t.Before(b.before) })
		}
		prev, hasPrev = sp.hiT, sp.hasHiT
	}
	if err != nil {
		return nil, err
	}
	page := []T{}
	take := func(line []byte) (bool, error) {
		it, t, ok := decode(line)
		if !ok {
			return true, nil
		}
		if hasPrev && outOfOrder(t) {
			return false, errUnsorted
		}
		prev, hasPrev = t, true
		if past(t) {
			return false, nil
		}
		if b.admits(t) {
			page = append(page, it)
		}
		return len(page) < n, nil
	}
	if ascending {
		err = linesForward(f, sp.lo, take)
	} else {
		err = linesBackward(f, sp.hi, take)
	}
	if err != nil {
		return nil, err
	}
	return page, nil
}

// span is what bisect learnt: every item starting before lo fails the
// predicate, every item starting at or after hi passes it (lo and hi are
// line starts, or the file's size). loT is the created_at of the item that
// ends at lo and hiT that of the first item at hi, when a probe read them.
type span struct {
	lo, hi         int64
	loT, hiT       time.Time
	hasLoT, hasHiT bool
}

// bisect searches f[0:size), sorted by created_at, for where past turns
// true (past is monotone in created_at). Each probe reads from a byte offset
// to the end of the first item that starts there or after, so it costs
// O(log size) line reads, lines skipped by readers included.
func bisect(f io.ReaderAt, size int64, at func([]byte) (time.Time, bool), past func(time.Time) bool) (span, error) {
	sp := span{hi: size}
	top := size // every line start in (lo, hi) is below top
	for top-sp.lo > bisectSpan {
		mid := sp.lo + (top-sp.lo)/2
		p, err := probe(f, mid, mid == sp.lo, sp.hi, at)
		if err != nil {
			return sp, err
		}
		switch {
		case !p.anyStart: // mid is inside the last line before hi
			top = mid
		case !p.found: // lines from p.first to hi are all skipped ones
			sp.hi, top = p.first, mid
		case sp.hasLoT && p.t.Before(sp.loT) || sp.hasHiT && sp.hiT.Before(p.t):
			return sp, errUnsorted
		case past(p.t):
			sp.hi, sp.hiT, sp.hasHiT, top = p.first, p.t, true, mid
		default:
			sp.lo, sp.loT, sp.hasLoT, top = p.end, p.t, true, sp.hi
		}
	}
	return sp, nil
}

// probed is one probe: the first line start at or after the offset (first),
// and the first item starting there or after, below hi (found, t, end: the
// offset after its line).
type probed struct {
	anyStart, found bool
	first, end      int64
	t               time.Time
}

// probe reads f[off:hi) from the first line start at or after off (off
// itself when atStart) to the end of the first item there.
func probe(f io.ReaderAt, off int64, atStart bool, hi int64, at func([]byte) (time.Time, bool)) (probed, error) {
	var p probed
	pos := off
	if !atStart {
		pos = off - 1 // a line starts at off when the byte before is '\n'
	}
	r := bufio.NewReaderSize(io.NewSectionReader(f, pos, hi-pos), 4<<10)
	if !atStart {
		for { // skip to the end of the line holding off-1
			chunk, err := r.ReadSlice('\n')
			pos += int64(len(chunk))
			if err == nil {
				break
			}
			if err == io.EOF {
				return p, nil
			}
			if err != bufio.ErrBufferFull {
				return p, err
			}
		}
	}
	p.anyStart, p.first = pos < hi, pos
	for pos < hi {
		line, err := r.ReadBytes('\n')
		pos += int64(len(line))
		if t, ok := at(line); ok {
			p.found, p.t, p.end = true, t, pos
			return p, nil
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return p, err
		}
	}
	return p, nil
}

// linesForward calls fn with the lines of f from start, first first, each
// with its newline (the last one may have none, or be empty), until fn
// returns false or an error. It reads on to the end of the file as it is
// now, not as it was at Stat.
func linesForward(f io.ReaderAt, start int64, fn func(line []byte) (bool, error)) error {
	r := bufio.NewReaderSize(io.NewSectionReader(f, start, math.MaxInt64-start), 64<<10)
	for {
		line, rerr := r.ReadBytes('\n')
		if more, err := fn(line); err != nil || !more {
			return err
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// linesBackward calls fn with the lines of f[0:end), last first, without
// their newlines, until fn returns false or an error. The line fn gets is
// valid only during the call.
func linesBackward(f io.ReaderAt, end int64, fn func(line []byte) (bool, error)) error {
	const chunk = 64 << 10
	var buf []byte // f[pos:end) not handed to fn yet: at most one '\n'-free head plus whole lines
	pos := end
	for {
		if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
			more, err := fn(buf[i+1:])
			if err != nil || !more {
				return err
			}
			buf = buf[:i]
			continue
		}
		if pos == 0 {
			_, err := fn(buf)
			return err
		}
		k := min(int64(chunk), pos)
		pos -= k
		nb := make([]byte, int(k)+len(buf))
		if got, err := f.ReadAt(nb[:k], pos); int64(got) < k {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		copy(nb[k:], buf)
		buf = nb
	}
}

// localClient binds a LocalStore to one session and user.
type localClient struct {
	store *LocalStore
	cfg   Config
}

func newLocalClient(cfg Config, dir string) *localClient {
	if cfg.UserID == "" {
		cfg.UserID = DefaultLocalUserID
	}
	s := OpenLocalStore(dir)
	s.SetPageSize(cfg.PageSize)
	return &localClient{store: s, cfg: cfg}
}

// done maps a cancelled context to ErrUnavailable, as the HTTP client does.
func (c *localClient) done(ctx context.Context, cmd, alias string) error {
	if err := ctx.Err(); err != nil {
		return opErr(cmd, alias, unavailable(err))
	}
	return nil
}

func (c *localClient) Me(ctx context.Context) (User, error) {
	if err := c.done(ctx, CmdMe, ""); err != nil {
		return User{}, err
	}
	return User{UserID: c.cfg.UserID, Name: "local"}, nil
}

func (c *localClient) Download(ctx context.Context, alias string) (Object, error) {
	if err := c.done(ctx, CmdDownload, alias); err != nil {
		return Object{}, err
	}
	o, err := c.store.Download(ctx, c.cfg.SessionID, alias)
	o.RevisionID = c.cfg.RevisionID
	return o, opErr(CmdDownload, alias, err)
}

func (c *localClient) Upload(ctx context.Context, alias string, value json.RawMessage) error {
	if err := c.done(ctx, CmdUpload, alias); err != nil {
		return err
	}
	return opErr(CmdUpload, alias, c.store.Upload(ctx, c.cfg.SessionID, alias, value))
}

func (c *localClient) Delete(ctx context.Context, alias string) error {
	if err := c.done(ctx, CmdDelete, alias); err != nil {
		return err
	}
	return opErr(CmdDelete, alias, c.store.Delete(ctx, c.cfg.SessionID, alias))
}

func (c *localClient) List(ctx context.Context) ([]string, error) {
	if err := c.done(ctx, CmdList, ""); err != nil {
		return nil, err
	}
	objs, err := c.store.Objects(ctx, c.cfg.SessionID)
	if err != nil {
		return nil, opErr(CmdList, "", err)
	}
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.Alias
	}
	return out, nil
}

func (c *localClient) Post(ctx context.Context, alias string, p NewItem) (Item, error) {
	if err := c.done(ctx, CmdPost, alias); err != nil {
		return Item{}, err
	}
	it, err := c.store.Post(ctx, c.cfg.SessionID, c.cfg.UserID, alias, p)
	return it, opErr(CmdPost, alias, err)
}

// ListItems answers with the local clock as the page's Date: the store
// stamps new items with it.
func (c *localClient) ListItems(ctx context.Context, alias string, q ItemQuery) (Page, error) {
	if err := c.done(ctx, CmdListItems, alias); err != nil {
		return Page{}, err
	}
	items, err := c.store.ListItems(ctx, c.cfg.SessionID, alias, q)
	return Page{Items: items, Date: time.Now()}, opErr(CmdListItems, alias, err)
}
