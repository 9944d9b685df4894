package run

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/setup"
)

// The tests of this file read the local files in the shapes the
// blobhub-worker documentation shows (e2e/testdata/docs, each fixture naming
// the page it comes from), since a person may point the daemon and
// bhw-run at one account, or move a machine from one to the other.

// docsFixture reads e2e/testdata/docs/name, with each old → new replaced.
func docsFixture(t *testing.T, name string, replace ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "e2e", "testdata", "docs", name))
	if err != nil {
		t.Fatal(err)
	}
	return []byte(strings.NewReplacer(replace...).Replace(string(b)))
}

// documentedTime is the form the documentation writes timestamps in.
var documentedTime = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`)

func readYAML(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, b)
	}
	return m
}

// wantFile checks that path still holds exactly body.
func wantFile(t *testing.T, path string, body []byte) {
	t.Helper()
	if got, _ := os.ReadFile(path); string(got) != string(body) {
		t.Fatalf("%s was rewritten:\n%s\nwant it as it was:\n%s", path, got, body)
	}
}

func dig(m map[string]any, path ...string) any {
	var v any = m
	for _, k := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}

// TestDocsSectionYAML: a section.yaml in the documented shape (events as
// a mapping, attachment.error with null code and message) is read, its
// event cursor kept, and written back in the same shape.
func TestDocsSectionYAML(t *testing.T) {
	h := newHarness(t, false)
	s := h.setup()
	if err := os.MkdirAll(s.JobDir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(s.JobDir, "section.yaml")
	if err := os.WriteFile(path, docsFixture(t, "section.yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	const alias = "docs/section"
	h.firstTurn(alias, "hello", agenttest.Script{Turns: [][]agenttest.Step{{{Text: "hi"}}}})

	m := readYAML(t, path)
	if got := dig(m, "events", "last_processed_at"); got != "2026-05-27T12:40:00Z" {
		t.Fatalf("events.last_processed_at %v, want the daemon's cursor kept", got)
	}
	att, _ := dig(m, "attachment").(map[string]any)
	if att["status"] != "attached" {
		t.Fatalf("attachment %v", att)
	}
	e, ok := att["error"].(map[string]any)
	if !ok || e["code"] != nil || e["message"] != nil || len(e) != 2 {
		t.Fatalf("attachment.error %v, want {code: null, message: null}", att["error"])
	}
	if at, _ := att["attached_at"].(string); at != "2026-05-27T12:35:01Z" {
		t.Fatalf("attached_at %q: an attachment that still stands keeps its time", at)
	}
	if dig(m, "session", "session_id") != bhtest.SessionID {
		t.Fatalf("session %v, want the configured one", dig(m, "session"))
	}
}

// TestSectionYAMLRefusal: a refused attachment is written as the
// documented attachment.error {code, message}, and a fresh section.yaml
// gets the documented keys and time form.
func TestSectionYAMLRefusal(t *testing.T) {
	h := newHarness(t, false)
	const alias = "docs/refused"
	h.handOff(alias, "approval", "hello")
	h.srv.Put("worker", `{"type":"thread","thread":{"metadata":{"user":{"user_id":"usr_other"}}}}`)
	wantExitCode(t, h.run(alias), exit.Refused, exit.CodeSessionOwnedByOther)
	m := readYAML(t, filepath.Join(h.setup().JobDir, "section.yaml"))
	if dig(m, "attachment", "status") != "refused" || dig(m, "attachment", "error", "code") != exit.CodeSessionOwnedByOther {
		t.Fatalf("attachment %v", dig(m, "attachment"))
	}
	if msg, _ := dig(m, "attachment", "error", "message").(string); !strings.Contains(msg, "usr_other") {
		t.Fatalf("attachment.error.message %q", msg)
	}
	if _, ok := m["events"].(map[string]any); !ok {
		t.Fatalf("events %v, want the documented mapping", m["events"])
	}

	// Attached later: the error is cleared to nulls, attached_at is stamped.
	h.srv.Put("worker", `{"type":"thread","thread":{"metadata":{"user":{"user_id":"`+bhtest.RunnerUserID+`"}}}}`)
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "hi"}}}})
	want(t, h.run(alias), OutcomeTurnCompleted, 0)
	m = readYAML(t, filepath.Join(h.setup().JobDir, "section.yaml"))
	if e, ok := dig(m, "attachment", "error").(map[string]any); !ok || e["code"] != nil || e["message"] != nil {
		t.Fatalf("attachment.error %v, want nulls", dig(m, "attachment", "error"))
	}
	if at, _ := dig(m, "attachment", "attached_at").(string); !documentedTime.MatchString(at) {
		t.Fatalf("attached_at %q, want the documented form 2026-05-27T12:35:01Z", at)
	}
}

// TestSectionYAMLWrongShape: a section.yaml that is YAML but of another
// shape is refused with a message naming the field and the shape it
// should have, not "not valid YAML"; a broken file still says so.
func TestSectionYAMLWrongShape(t *testing.T) {
	cases := []struct{ name, body, want, not string }{
		{"events as a list", "events:\n  - a\n  - b\n", "events", "not valid YAML"},
		{"attachment as a string", "attachment: yes\n", "attachment", "not valid YAML"},
		{"not YAML", "attachment: {status: [\n", "not valid YAML", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, false)
			s := h.setup()
			if err := os.MkdirAll(s.JobDir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(s.JobDir, "section.yaml"), []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			const alias = "docs/shape"
			h.handOff(alias, "approval", "hello")
			sum := h.run(alias)
			wantExitCode(t, sum, exit.Config, exit.CodeStateTreeInvalid)
			if !strings.Contains(sum.Error.Message, tc.want) || tc.not != "" && strings.Contains(sum.Error.Message, tc.not) {
				t.Fatalf("message %q: want it to name %q (and not say %q)", sum.Error.Message, tc.want, tc.not)
			}
		})
	}
}

// TestDocsIdentityYAML: identity.yaml in the documented shape (user:
// {user_id, name, email, recorded_at}) is read; a different user behind
// the key is refused with USER_IDENTITY_MISMATCH and the file is never
// replaced; bhw-run's earlier flat shape is read and rewritten in the
// documented one; a fresh file is written in it.
func TestDocsIdentityYAML(t *testing.T) {
	const alias = "docs/identity"
	withIdentity := func(t *testing.T, body []byte) *harness {
		h := newHarness(t, false)
		if body != nil {
			if err := os.WriteFile(setup.IdentityPath(h.state), body, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		h.handOff(alias, "approval", "hello")
		h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "hi"}}}})
		return h
	}
	wantIdentity := func(t *testing.T, h *harness, userID, name, recordedAt string) {
		t.Helper()
		m := readYAML(t, setup.IdentityPath(h.state))
		if dig(m, "user", "user_id") != userID || dig(m, "user", "name") != name {
			t.Fatalf("identity.yaml %v, want user %s (%s)", m, userID, name)
		}
		at, _ := dig(m, "user", "recorded_at").(string)
		if recordedAt != "" && at != recordedAt || !documentedTime.MatchString(at) {
			t.Fatalf("user.recorded_at %q, want %q in the documented form", at, recordedAt)
		}
		if _, flat := m["user_id"]; flat {
			t.Fatalf("identity.yaml %v keeps the flat user_id", m)
		}
	}

	// refused runs with identity.yaml holding body: the run ends exitCode
	// with code, its message names named, and the file is left as it was.
	refused := func(t *testing.T, body []byte, exitCode int, code, named string) *harness {
		t.Helper()
		h := withIdentity(t, body)
		sum := h.run(alias)
		wantExitCode(t, sum, exitCode, code)
		if !strings.Contains(sum.Error.Message, named) {
			t.Fatalf("message %q does not name %s", sum.Error.Message, named)
		}
		wantFile(t, setup.IdentityPath(h.state), body)
		return h
	}

	t.Run("documented, same user", func(t *testing.T) {
		body := docsFixture(t, "identity.yaml", "usr_01J...", bhtest.RunnerUserID)
		h := withIdentity(t, body)
		want(t, h.run(alias), OutcomeTurnCompleted, 0)
		wantFile(t, setup.IdentityPath(h.state), body)
		// Our own items are recognised by the recorded user: nothing new.
		want(t, h.run(alias), OutcomeIdle, 0)
	})
	t.Run("documented, another user", func(t *testing.T) {
		// The message names the recorded user.
		h := refused(t, docsFixture(t, "identity.yaml"), exit.Refused, exit.CodeUserIdentityMismatch, "usr_01J...")
		if got := h.wireState(alias); got != "pending" {
			t.Fatalf("wire state %q after a refusal", got)
		}
	})
	t.Run("flat, same user", func(t *testing.T) {
		h := withIdentity(t, []byte("user_id: "+bhtest.RunnerUserID+"\nname: Old Name\nemail: old@example.test\nrecorded_at: \"2026-01-02T03:04:05.123456+00:00\"\n"))
		want(t, h.run(alias), OutcomeTurnCompleted, 0)
		wantIdentity(t, h, bhtest.RunnerUserID, "Old Name", "2026-01-02T03:04:05Z")
	})
	t.Run("flat, another user", func(t *testing.T) {
		h := withIdentity(t, []byte("user_id: usr_somebody_else\n"))
		wantExitCode(t, h.run(alias), exit.Refused, exit.CodeUserIdentityMismatch)
	})
	t.Run("none yet", func(t *testing.T) {
		h := withIdentity(t, nil)
		want(t, h.run(alias), OutcomeTurnCompleted, 0)
		wantIdentity(t, h, bhtest.RunnerUserID, "Runner Test", "")
		if dig(readYAML(t, setup.IdentityPath(h.state)), "user", "email") != "runner@example.test" {
			t.Fatal("email not recorded")
		}
	})
	t.Run("no user recorded", func(t *testing.T) {
		refused(t, []byte("user:\n  name: Somebody\n"), exit.Config, exit.CodeStateTreeInvalid, "user_id")
	})
}

// TestDocsConfigYAML: a config.yaml with the daemon's polling block (the
// documented example is loaded whole, with the real adapters, by the main
// package's TestDocsConfigExample) is read; the block, which tunes the
// daemon's poll loop, is said at debug to be ignored; keys neither
// documents are still refused, named with their line.
func TestDocsConfigYAML(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	// A run says so at debug.
	h := newHarness(t, false)
	h.cfg = "polling:\n  interval_idle_ms: 1500\n  interval_active_ms: 3000\n  backoff_max_ms: 30000\n"
	h.writeConfig()
	var logs bytes.Buffer
	h.runner = func(r *Runner) {
		r.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	const alias = "docs/config"
	h.firstTurn(alias, "hello", agenttest.Script{Turns: [][]agenttest.Step{{{Text: "hi"}}}})
	if !strings.Contains(logs.String(), `"level":"DEBUG","msg":"config.yaml block read and ignored`) || !strings.Contains(logs.String(), `"block":"polling"`) {
		t.Fatalf("no debug record of the ignored block:\n%s", logs.String())
	}

	for _, tc := range []struct{ body, want string }{
		{"pollng:\n  interval_idle_ms: 1\n", "line 1: unknown key pollng"},
		{"polling:\n  interval_ms: 1\n", "line 2: polling has no key interval_ms"},
		{"polling:\n  interval_idle_ms: soon\n", "polling.interval_idle_ms is \"soon\"; it should be a whole number"},
	} {
		if err := os.WriteFile(path, []byte(tc.body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := setup.Resolve(setup.Options{APIURL: "file://" + dir, StateDir: dir, ConfigPath: path, Home: dir, RevisionID: "rev_x", SessionID: "ses_x"}, "")
		var ee *exit.Error
		if !errors.As(err, &ee) || ee.Code != exit.CodeInvalidConfig || !strings.Contains(ee.Message, tc.want) {
			t.Errorf("%q: %v, want INVALID_CONFIG %q", tc.body, err, tc.want)
		}
	}
}

// TestDocsCredentialsV1: blobhub-worker v1's ~/.blobhub-worker/credentials.yaml
// (api: {key, url}) is read after the BlobHub CLI's file, under the same
// mode check: it gives the key and URL when no profile is selected and no
// key is passed; a CLI profile, --api-key or BLOBHUB_API_KEY outranks it.
func TestDocsCredentialsV1(t *testing.T) {
	write := func(t *testing.T, path string, body []byte, mode os.FileMode) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, body, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}
	v1 := docsFixture(t, "credentials.yaml", "bhk_...", "bhk_v1_key", "https://api.blobhub.io/v1", "https://v1.example.test/v1")
	resolve := func(t *testing.T, home string, o setup.Options) (*setup.Setup, error) {
		t.Helper()
		o.Home, o.StateDir, o.RevisionID, o.SessionID = home, filepath.Join(home, "state"), "rev_x", "ses_x"
		return setup.Resolve(o, "")
	}

	t.Run("alone", func(t *testing.T) {
		home := t.TempDir()
		write(t, setup.V1CredentialsPath(home), v1, 0o600)
		s, err := resolve(t, home, setup.Options{})
		if err != nil {
			t.Fatal(err)
		}
		keyHash := sha256.Sum256([]byte("bhk_v1_key"))
		if s.APIKey != "bhk_v1_key" || s.APIURL != "https://v1.example.test/v1" || s.StateName != "key-"+hex.EncodeToString(keyHash[:])[:12] {
			t.Fatalf("key %q url %q state %q", s.APIKey, s.APIURL, s.StateName)
		}
	})
	t.Run("readable by others", func(t *testing.T) {
		home := t.TempDir()
		write(t, setup.V1CredentialsPath(home), v1, 0o644)
		_, err := resolve(t, home, setup.Options{})
		var ee *exit.Error
		if !errors.As(err, &ee) || ee.Code != exit.CodeInsecureCredentials || !strings.Contains(ee.Message, setup.V1CredentialsPath(home)) || !strings.Contains(ee.Message, "chmod 600") {
			t.Fatalf("%v, want INSECURE_CREDENTIALS_PERMISSIONS naming the file", err)
		}
	})
	t.Run("after the CLI's profile", func(t *testing.T) {
		home := t.TempDir()
		write(t, setup.V1CredentialsPath(home), v1, 0o600)
		write(t, setup.CredentialsPath(home), []byte("default: prod\nprofiles:\n  prod: {api_key: bhk_cli_key, api_url: https://cli.example.test/v1}\n"), 0o600)
		s, err := resolve(t, home, setup.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if s.APIKey != "bhk_cli_key" || s.APIURL != "https://cli.example.test/v1" || s.StateName != "prod" {
			t.Fatalf("key %q url %q state %q, want the CLI profile", s.APIKey, s.APIURL, s.StateName)
		}
	})
	t.Run("after a key passed", func(t *testing.T) {
		home := t.TempDir()
		write(t, setup.V1CredentialsPath(home), v1, 0o600)
		s, err := resolve(t, home, setup.Options{APIKey: "bhk_env_key"})
		if err != nil {
			t.Fatal(err)
		}
		if s.APIKey != "bhk_env_key" || s.APIURL != setup.DefaultAPIURL {
			t.Fatalf("key %q url %q", s.APIKey, s.APIURL)
		}
		s, err = resolve(t, home, setup.Options{APIURL: "https://flag.example.test/v1"})
		if err != nil {
			t.Fatal(err)
		}
		if s.APIKey != "bhk_v1_key" || s.APIURL != "https://flag.example.test/v1" {
			t.Fatalf("key %q url %q: the URL flag outranks the file, the key comes from it", s.APIKey, s.APIURL)
		}
	})
	t.Run("not for a local store", func(t *testing.T) {
		home := t.TempDir()
		write(t, setup.V1CredentialsPath(home), v1, 0o600)
		s, err := resolve(t, home, setup.Options{APIURL: "file://" + home + "/store"})
		if err != nil {
			t.Fatal(err)
		}
		if s.APIKey != "" || !strings.HasPrefix(s.StateName, "local-") {
			t.Fatalf("key %q state %q", s.APIKey, s.StateName)
		}
	})
}

// TestLocalTimestamps: what bhw-run stamps into its local files (and the
// worker object, whose documented shape writes times the same way) is in
// the documented form, 2026-05-27T12:35:01Z; timestamps copied from the
// server (the items' created_at in the cursors) stay exactly as served.
func TestLocalTimestamps(t *testing.T) {
	h := newHarness(t, false)
	const alias = "docs/times"
	h.handOff(alias, "approval", "hello")
	h.srv.Put("docs/note", `{"type":"note"}`)
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "hi"}}}})
	want(t, h.run(alias), OutcomeTurnCompleted, 0)
	r := &Runner{Setup: h.setup(), Client: h.client(), Logger: slog.New(slog.DiscardHandler)}
	if _, err := r.List(t.Context(), ListOptions{}); err != nil {
		t.Fatal(err)
	}
	jobDir := h.setup().JobDir
	stamp := func(where, s string) {
		t.Helper()
		if !documentedTime.MatchString(s) {
			t.Errorf("%s = %q, want the documented form 2026-05-27T12:35:01Z", where, s)
		}
	}

	th := readYAML(t, filepath.Join(setup.ThreadDir(jobDir, alias), "thread.yaml"))
	stamp("thread.yaml turn.started_at", fmt.Sprint(dig(th, "turn", "started_at")))
	items := h.srv.Items(alias)
	served := map[string]string{}
	for _, it := range items {
		served[it.ID] = it.CreatedAt
	}
	for _, c := range []string{"last_posted", "last_consumed"} {
		id, at := fmt.Sprint(dig(th, "items", c, "item_id")), fmt.Sprint(dig(th, "items", c, "created_at"))
		if served[id] == "" || served[id] != at {
			t.Errorf("items.%s = %s at %s, want the server's created_at %q as served", c, id, at, served[id])
		}
	}
	if got, last := fmt.Sprint(dig(th, "items", "scanned", "created_at")), items[len(items)-1].CreatedAt; got != last {
		t.Errorf("items.scanned.created_at %q, want %q as served", got, last)
	}

	jb, err := os.ReadFile(filepath.Join(setup.ThreadDir(jobDir, alias), "emissions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(jb)), "\n") {
		var rec journalRecord
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Emission != nil {
			stamp("emissions.jsonl at", rec.Emission.At)
		}
		if rec.Posted != "" && served[rec.ItemID] != rec.CreatedAt {
			t.Errorf("journal posted %s at %q, want %q as served", rec.ItemID, rec.CreatedAt, served[rec.ItemID])
		}
	}
	lb, err := os.ReadFile(filepath.Join(jobDir, "logs", "section.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(lb)), "\n") {
		var rec struct {
			Time string `json:"time"`
		}
		_ = json.Unmarshal([]byte(line), &rec)
		stamp("section.log time", rec.Time)
	}
	nm := readYAML(t, filepath.Join(jobDir, "not_mine.yaml"))
	stamp("not_mine.yaml updated_at", fmt.Sprint(dig(nm, "reasons", "docs/note", "updated_at")))
	stamp("section.yaml attached_at", fmt.Sprint(dig(readYAML(t, filepath.Join(jobDir, "section.yaml")), "attachment", "attached_at")))
	stamp("identity.yaml user.recorded_at", fmt.Sprint(dig(readYAML(t, setup.IdentityPath(h.state)), "user", "recorded_at")))

	w, ok := h.srv.Get("worker")
	if !ok {
		t.Fatal("no worker object")
	}
	var wv map[string]any
	if err := json.Unmarshal(w.Value, &wv); err != nil {
		t.Fatal(err)
	}
	stamp("worker instance.started_at", fmt.Sprint(dig(wv, "thread", "metadata", "instance", "started_at")))
	stamp("worker instance.last_seen_at", fmt.Sprint(dig(wv, "thread", "metadata", "instance", "last_seen_at")))
}

// TestDocsWorkerObject: the worker object bhw-run creates has the
// documented shape, key for key (worker/session-agent-harness/worker-object),
// with the documented attributes.
func TestDocsWorkerObject(t *testing.T) {
	h := newHarness(t, false)
	const alias = "docs/worker"
	h.firstTurn(alias, "hello", agenttest.Script{Turns: [][]agenttest.Step{{{Text: "hi"}}}})
	w, ok := h.srv.Get("worker")
	if !ok {
		t.Fatal("no worker object")
	}
	var got, doc map[string]any
	if err := json.Unmarshal(w.Value, &got); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(docsFixture(t, "worker.yaml"), &doc); err != nil {
		t.Fatal(err)
	}
	if g, d := keyTree(got), keyTree(doc); !slices.Equal(g, d) {
		t.Fatalf("worker object keys\n%v\nwant the documented\n%v", g, d)
	}
	if a := dig(got, "thread", "attributes"); !reflect.DeepEqual(a, dig(doc, "thread", "attributes")) {
		t.Fatalf("attributes %v, want %v", a, dig(doc, "thread", "attributes"))
	}
	if dig(got, "thread", "metadata", "user", "user_id") != bhtest.RunnerUserID || dig(got, "thread", "metadata", "instance", "status") != "attached" {
		t.Fatalf("worker object %s", w.Value)
	}
}

// keyTree lists the dotted paths of every key in v, sorted.
func keyTree(v any) []string {
	var out []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		for k, c := range m {
			p := prefix + k
			out = append(out, p)
			walk(p+".", c)
		}
	}
	walk("", v)
	slices.Sort(out)
	return out
}
