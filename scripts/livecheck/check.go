package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/envelope"
)

// Report is what a check found: Diffs are answers whose shape differs from
// what bhw-run expects (bhw-run would misread them); Guesses settle a
// guess about the wire the documentation leaves open (what the server
// answered where blobhub/ guesses); Notes are facts worth knowing.
type Report struct {
	Alias   string // the throwaway thread
	Diffs   []Finding
	Guesses []Finding
	Notes   []Finding
}

// Finding is one line of a report.
type Finding struct {
	Step string // the command or check
	Text string
}

func (r *Report) diff(step, format string, args ...any) {
	r.Diffs = append(r.Diffs, Finding{step, fmt.Sprintf(format, args...)})
}

func (r *Report) guess(step, format string, args ...any) {
	r.Guesses = append(r.Guesses, Finding{step, fmt.Sprintf(format, args...)})
}

func (r *Report) note(step, format string, args ...any) {
	r.Notes = append(r.Notes, Finding{step, fmt.Sprintf(format, args...)})
}

// Write prints the report, one finding a line.
func (r *Report) Write(w io.Writer) {
	fmt.Fprintf(w, "live check on the throwaway thread %q\n", r.Alias)
	for _, f := range r.Notes {
		fmt.Fprintf(w, "note   %-26s %s\n", f.Step, f.Text)
	}
	for _, f := range r.Guesses {
		fmt.Fprintf(w, "guess  %-26s %s\n", f.Step, f.Text)
	}
	for _, f := range r.Diffs {
		fmt.Fprintf(w, "DIFF   %-26s %s\n", f.Step, f.Text)
	}
	if len(r.Diffs) == 0 {
		fmt.Fprintln(w, "every answer has the shape bhw-run expects")
	} else {
		fmt.Fprintf(w, "%d answer(s) differ from what bhw-run expects\n", len(r.Diffs))
	}
}

// exchange is one request and its answer as they crossed the wire.
type exchange struct {
	command, alias string
	status         int
	date           string
	body           []byte
}

// recorder keeps every answer the client receives, so the check can look
// at its raw shape, not only at what the lenient client makes of it.
type recorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	log  []exchange
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	x := exchange{command: blobhub.CmdMe}
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(b))
		var probe struct{ Command, Alias string }
		_ = json.Unmarshal(b, &probe)
		x.command, x.alias = probe.Command, probe.Alias
	}
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	b, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	if rerr != nil {
		return nil, rerr
	}
	x.status, x.date, x.body = resp.StatusCode, resp.Header.Get("Date"), b
	r.mu.Lock()
	r.log = append(r.log, x)
	r.mu.Unlock()
	return resp, nil
}

// last is the last answer of command (to alias, when given).
func (r *recorder) last(command, alias string) exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.log) - 1; i >= 0; i-- {
		if x := r.log[i]; x.command == command && (alias == "" || x.alias == alias) {
			return x
		}
	}
	return exchange{}
}

// Options tune a check.
type Options struct {
	// Items is how many items are posted to the throwaway thread (6 when
	// 0): enough for a tail over several pages on a server whose page is
	// smaller.
	Items int
}

// Check talks to the session cfg names, on a throwaway thread, the way a
// run does — identity, a thread envelope, items posted and read back in
// pages, an artifact object, the answers for what does not exist — and
// reports every answer whose shape differs from what bhw-run expects.
// It removes what it made at the end. err is a failure to check at all.
func Check(ctx context.Context, cfg blobhub.Config, o Options) (*Report, error) {
	if o.Items <= 0 {
		o.Items = 6
	}
	rec := &recorder{next: http.DefaultTransport}
	hc := &http.Client{Transport: rec}
	if cfg.HTTPClient != nil {
		c := *cfg.HTTPClient
		if c.Transport != nil {
			rec.next = c.Transport
		}
		c.Transport = rec
		hc = &c
	}
	cfg.HTTPClient = hc
	c, err := blobhub.New(cfg)
	if err != nil {
		return &Report{}, err
	}
	var suffix [3]byte
	_, _ = rand.Read(suffix[:])
	alias := fmt.Sprintf("bhw-live-check/%s-%s", time.Now().UTC().Format("20060102T150405Z"), hex.EncodeToString(suffix[:]))
	rep := &Report{Alias: alias}
	k := &checker{c: c, rec: rec, rep: rep, alias: alias, artifact: alias + "/artifacts/live-check.txt"}

	me, err := k.me(ctx)
	if err != nil {
		return rep, err
	}
	if err := k.thread(ctx); err != nil {
		return rep, err
	}
	defer k.cleanUp(context.WithoutCancel(ctx))
	posted := k.post(ctx, me.UserID, o.Items)
	k.list(ctx, posted)
	k.artifactObject(ctx)
	k.objects(ctx)
	k.absent(ctx)
	return rep, nil
}

type checker struct {
	c               blobhub.Client
	rec             *recorder
	rep             *Report
	alias, artifact string
	made            []string // aliases to remove at the end
}

// me: GET /users/me carries the user id runs filter their own items by.
func (k *checker) me(ctx context.Context) (blobhub.User, error) {
	u, err := k.c.Me(ctx)
	x := k.rec.last(blobhub.CmdMe, "")
	if err != nil {
		if x.status/100 != 2 {
			return u, fmt.Errorf("GET /users/me: %w", err)
		}
		k.rep.diff("users/me", "answer %s: %v", short(x.body), err)
		return u, nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(x.body, &m) != nil {
		k.rep.diff("users/me", "answer is not a JSON object: %s", short(x.body))
		return u, nil
	}
	if _, ok := m["user"]; !ok {
		k.rep.diff("users/me", "the user is not under \"user\" (docs/wire.md): %s", short(x.body))
	}
	for _, f := range []struct{ key, v string }{{"name", u.Name}, {"email", u.Email}} {
		if f.v == "" {
			k.rep.note("users/me", "no %s: identity.yaml records it empty", f.key)
		}
	}
	return u, nil
}

// thread uploads the throwaway thread's envelope (a thread without an
// agent block or instance: no runner acts on it) and reads it back.
func (k *checker) thread(ctx context.Context) error {
	v := json.RawMessage(`{"type":"thread","thread":{"attributes":{"name":"bhw-run live check","description":"throwaway thread of make live-check; safe to delete"},"metadata":{}}}`)
	if err := k.c.Upload(ctx, k.alias, v); err != nil {
		return fmt.Errorf("upload %s: %w", k.alias, err)
	}
	k.made = append(k.made, k.alias)
	if x := k.rec.last(blobhub.CmdUpload, k.alias); !isObject(x.body) {
		k.rep.diff(blobhub.CmdUpload, "answer %s is not a JSON object (documented: an empty one)", short(x.body))
	}
	k.roundTrip(ctx, k.alias, v)
	return nil
}

// roundTrip downloads alias and compares its value with what was uploaded.
func (k *checker) roundTrip(ctx context.Context, alias string, v json.RawMessage) {
	o, err := k.c.Download(ctx, alias)
	x := k.rec.last(blobhub.CmdDownload, alias)
	if err != nil {
		k.rep.diff(blobhub.CmdDownload, "%s: %v (answer %d %s)", alias, err, x.status, short(x.body))
		return
	}
	if !jsonEqual(o.Value, v) {
		k.rep.diff(blobhub.CmdDownload, "%s came back as %s, uploaded %s", alias, short(o.Value), short(v))
	}
}

// post posts n items carrying an emission_id, as a run does, as fast as
// it can (items may share an instant), and checks each answer.
func (k *checker) post(ctx context.Context, userID string, n int) []blobhub.Item {
	var posted []blobhub.Item
	for i := range n {
		meta := json.RawMessage(fmt.Sprintf(`{"type":"status","status":"live_check","emission_id":"livecheck:%d"}`, i+1))
		content := []blobhub.Block{{Type: "text", Text: fmt.Sprintf("live check item %d", i+1)}}
		it, err := k.c.Post(ctx, k.alias, blobhub.NewItem{Content: content, Metadata: meta})
		x := k.rec.last(blobhub.CmdPost, k.alias)
		if err != nil {
			k.rep.diff(blobhub.CmdPost, "item %d: %v (answer %d %s)", i+1, err, x.status, short(x.body))
			continue
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(x.body, &m) != nil || m["item"] == nil {
			k.rep.diff(blobhub.CmdPost, "answer %s has no \"item\" (documented: the persisted item under \"item\")", short(x.body))
		}
		k.item(blobhub.CmdPost, it)
		if userID != "" && it.UserID != userID {
			k.rep.diff(blobhub.CmdPost, "item %s is stamped user_id %q, /users/me says %q: runs would read their own items as a person's", it.ID, it.UserID, userID)
		}
		if !jsonEqual(it.Metadata, meta) {
			k.rep.diff(blobhub.CmdPost, "metadata came back as %s, posted %s (emission_id must survive: exactly-once depends on it)", short(it.Metadata), meta)
		}
		if !reflect.DeepEqual(it.Content, content) {
			k.rep.diff(blobhub.CmdPost, "content came back as %+v, posted %+v", it.Content, content)
		}
		posted = append(posted, it)
	}
	same := 0
	for i := 1; i < len(posted); i++ {
		if posted[i].CreatedAt == posted[i-1].CreatedAt {
			same++
		}
	}
	k.rep.note(blobhub.CmdPost, "%d of %d items shared the created_at of the one before", same, len(posted))
	return posted
}

// item checks the fields bhw-run reads of an item.
func (k *checker) item(step string, it blobhub.Item) {
	if it.ID == "" {
		k.rep.diff(step, "an item has no id")
	}
	if _, err := blobhub.ParseTime(it.CreatedAt); err != nil {
		k.rep.diff(step, "item %s: created_at %q is not a timestamp bhw-run reads", it.ID, it.CreatedAt)
	}
}

// list reads the items back: both orders, a strict created_since, and a
// tail over every page from the start, which must deliver each item
// once, in order.
func (k *checker) list(ctx context.Context, posted []blobhub.Item) {
	if len(posted) == 0 {
		return
	}
	for _, asc := range []bool{true, false} {
		p, err := k.c.ListItems(ctx, k.alias, blobhub.ItemQuery{Ascending: asc})
		x := k.rec.last(blobhub.CmdListItems, k.alias)
		if err != nil {
			k.rep.diff(blobhub.CmdListItems, "ascending=%v: %v (answer %d %s)", asc, err, x.status, short(x.body))
			continue
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(x.body, &m) != nil || m["items"] == nil {
			k.rep.diff(blobhub.CmdListItems, "answer %s has no \"items\" (documented: the page under \"items\")", short(x.body))
		}
		if x.date == "" {
			k.rep.note(blobhub.CmdListItems, "no Date header: runs bound their read by the local clock instead of the server's")
		}
		for _, it := range p.Items {
			k.item(blobhub.CmdListItems, it)
		}
		if !sorted(p.Items, asc) {
			k.rep.diff(blobhub.CmdListItems, "ascending=%v: the page is not in that created_at order", asc)
		}
		if asc && len(p.Items) < len(posted) {
			k.rep.note(blobhub.CmdListItems, "a page holds %d items: the tail below read several", len(p.Items))
		}
	}
	since := posted[0].CreatedAt
	p, err := k.c.ListItems(ctx, k.alias, blobhub.ItemQuery{Ascending: true, CreatedSince: since})
	if err == nil {
		for _, it := range p.Items {
			if t, _ := blobhub.ParseTime(it.CreatedAt); !t.After(mustTime(since)) {
				k.rep.diff(blobhub.CmdListItems, "created_since %s answered item %s of %s: the bound is not strict (documented: created_at > created_since)", since, it.ID, it.CreatedAt)
			}
		}
	}
	got, _, more, err := blobhub.Tail(ctx, k.c, k.alias, blobhub.Cursor{}, blobhub.Limits{Items: 10 * len(posted)})
	if err != nil {
		k.rep.diff("tail", "%v", err)
		return
	}
	var want, ids []string
	for _, it := range posted {
		want = append(want, it.ID)
	}
	for _, it := range got {
		ids = append(ids, it.ID)
	}
	if more || !slices.Equal(ids, want) {
		hint := ""
		if k.sharedInstants(posted) {
			hint = "; items share instants: more of them at one instant than a page holds cannot all be read by created_since"
		}
		k.rep.diff("tail", "read %v (more: %v), posted %v: every item once, in order, is what runs rely on%s", ids, more, want, hint)
	}
}

func (k *checker) sharedInstants(items []blobhub.Item) bool {
	seen := map[string]bool{}
	for _, it := range items {
		if seen[it.CreatedAt] {
			return true
		}
		seen[it.CreatedAt] = true
	}
	return false
}

// artifactObject uploads and downloads an artifact object as a run
// publishes one, and checks that posting to it is refused as not a thread.
func (k *checker) artifactObject(ctx context.Context) {
	data := "bhw-run live check\n"
	sum := sha256.Sum256([]byte(data))
	v := envelope.Artifact{Name: "live-check.txt", Path: "live-check.txt", MediaType: "text/plain; charset=utf-8", Size: int64(len(data)),
		SHA256: hex.EncodeToString(sum[:]), Encoding: "utf-8", Data: data, Thread: k.alias}.Value()
	if err := k.c.Upload(ctx, k.artifact, v); err != nil {
		k.rep.diff(blobhub.CmdUpload, "artifact %s: %v", k.artifact, err)
		return
	}
	k.made = append(k.made, k.artifact)
	k.roundTrip(ctx, k.artifact, v)
	_, err := k.c.Post(ctx, k.artifact, blobhub.NewItem{Content: []blobhub.Block{{Type: "text", Text: "x"}}})
	k.noThread(blobhub.CmdPost, k.artifact, err)
}

// objects lists the session's objects; both throwaway aliases are there.
func (k *checker) objects(ctx context.Context) {
	aliases, err := k.c.List(ctx)
	x := k.rec.last(blobhub.CmdList, "")
	if err != nil {
		k.rep.diff(blobhub.CmdList, "%v (answer %d %s)", err, x.status, short(x.body))
		return
	}
	var m map[string]json.RawMessage
	_ = json.Unmarshal(x.body, &m)
	switch {
	case m["objects"] != nil:
	case m["aliases"] != nil:
		k.rep.guess(blobhub.CmdList, "the aliases are under \"aliases\" (the test hub answers \"objects\"; bhw-run reads both)")
	default:
		k.rep.guess(blobhub.CmdList, "the answer is a bare list (bhw-run reads it)")
	}
	for _, a := range k.made {
		if !slices.Contains(aliases, a) {
			k.rep.diff(blobhub.CmdList, "%s is not in the listing", a)
		}
	}
}

// absent: what does not exist is answered as bhw-run expects: a download
// not found, a post or list invalid_thread_envelope.
func (k *checker) absent(ctx context.Context) {
	missing := k.alias + "/no-such-thread"
	_, err := k.c.Download(ctx, missing)
	if x := k.rec.last(blobhub.CmdDownload, missing); !errors.Is(err, blobhub.ErrNotFound) {
		k.rep.diff(blobhub.CmdDownload, "an absent alias: %v (answer %d %s); runs take not found (403, 404 or code not_found) for \"no such thread\"", err, x.status, short(x.body))
	} else {
		k.rep.note(blobhub.CmdDownload, "an absent alias: %d %s", x.status, short(x.body))
	}
	_, err = k.c.Post(ctx, missing, blobhub.NewItem{Content: []blobhub.Block{{Type: "text", Text: "x"}}})
	k.noThread(blobhub.CmdPost, missing, err)
	_, err = k.c.ListItems(ctx, missing, blobhub.ItemQuery{Ascending: true})
	k.noThread(blobhub.CmdListItems, missing, err)
}

// noThread checks the documented invalid_thread_envelope answer, and
// says which status it came with (the documentation gives none; the test
// hub answers blobhub.StatusInvalidThreadEnvelope, a guess).
func (k *checker) noThread(step, alias string, err error) {
	x := k.rec.last(step, alias)
	if !errors.Is(err, blobhub.ErrNoThread) {
		k.rep.diff(step, "%s, not a thread: %v (answer %d %s); documented: invalid_thread_envelope", alias, err, x.status, short(x.body))
		return
	}
	if x.status != blobhub.StatusInvalidThreadEnvelope {
		k.rep.guess(step, "invalid_thread_envelope comes with status %d, not the %d the test hub guesses (bhw-run reads the code under any status)", x.status, blobhub.StatusInvalidThreadEnvelope)
	}
	var m struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(x.body, &m) != nil || m.Error == "" {
		k.rep.diff(step, "the error body is %s, not the failure envelope {\"status\", \"error\": code, \"message\"} (docs/wire.md)", short(x.body))
	}
}

// cleanUp deletes what the check made, the artifact first.
func (k *checker) cleanUp(ctx context.Context) {
	for i := len(k.made) - 1; i >= 0; i-- {
		a := k.made[i]
		if err := k.c.Delete(ctx, a); err != nil {
			x := k.rec.last(blobhub.CmdDelete, a)
			k.rep.guess(blobhub.CmdDelete, "deleting %s failed: %v (answer %d %s); the request shape is a guess; delete it by hand", a, err, x.status, short(x.body))
			continue
		}
		if _, err := k.c.Download(ctx, a); !errors.Is(err, blobhub.ErrNotFound) {
			k.rep.guess(blobhub.CmdDelete, "%s is still there after delete_session_object answered: %v", a, err)
		}
	}
}

func sorted(items []blobhub.Item, asc bool) bool {
	for i := 1; i < len(items); i++ {
		a, b := mustTime(items[i-1].CreatedAt), mustTime(items[i].CreatedAt)
		if asc && b.Before(a) || !asc && a.Before(b) {
			return false
		}
	}
	return true
}

func mustTime(s string) time.Time { t, _ := blobhub.ParseTime(s); return t }

func isObject(b []byte) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(b, &m) == nil
}

func jsonEqual(x, y []byte) bool {
	var a, b any
	return json.Unmarshal(x, &a) == nil && json.Unmarshal(y, &b) == nil && reflect.DeepEqual(a, b)
}

// short is a body fit for a line of the report.
func short(b []byte) string {
	s := string(bytes.TrimSpace(b))
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}
