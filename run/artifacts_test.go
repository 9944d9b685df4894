package run

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/outbox"
	"github.com/blobhub/bhw-run/policy"
	"github.com/blobhub/bhw-run/setup"
	"github.com/blobhub/bhw-run/statefile"
)

const artifactsSource = ".bhw/outbox"

// artifactHarness is a harness whose thread carries an artifacts block and
// whose client counts uploads per alias.
type artifactHarness struct {
	*harness
	alias   string
	outbox  string
	mu      sync.Mutex
	uploads map[string]int
	fail    map[string]error // artifact path → what its uploads answer
}

func newArtifactHarness(t *testing.T, local bool) *artifactHarness {
	h := &artifactHarness{harness: newHarness(t, local), alias: "projects/p1/t1", uploads: map[string]int{}, fail: map[string]error{}}
	h.outbox = filepath.Join(h.work, artifactsSource)
	h.runner = func(r *Runner) { r.Client = &countingClient{Client: r.Client, h: h} }
	return h
}

type countingClient struct {
	blobhub.Client
	h *artifactHarness
}

func (c *countingClient) Upload(ctx context.Context, alias string, v json.RawMessage) error {
	c.h.mu.Lock()
	err := c.h.fail[strings.TrimPrefix(alias, c.h.alias+"/artifacts/")]
	if err == nil {
		c.h.uploads[alias]++
	}
	c.h.mu.Unlock()
	if err != nil {
		return err
	}
	return c.Client.Upload(ctx, alias, v)
}

func (h *artifactHarness) uploadsOf(rel string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.uploads[h.alias+"/artifacts/"+rel]
}

// activate hands off a thread with an artifacts block and runs its
// activation without a message: the outbox is created, no turn runs.
func (h *artifactHarness) activate() {
	h.t.Helper()
	raw, err := envelope.SetPath(envelope.NewThread(h.work, testAgent, "approval", h.alias),
		[]string{"thread", "metadata", "artifacts"}, json.RawMessage(`{"source":"`+artifactsSource+`"}`))
	if err != nil {
		h.t.Fatal(err)
	}
	h.srv.Put(h.alias, string(raw))
	want(h.t, h.run(h.alias), OutcomeIdle, 0)
	if fi, err := os.Stat(h.outbox); err != nil || !fi.IsDir() {
		h.t.Fatalf("no outbox after activation: %v", err)
	}
}

// turn runs one completed turn after a person's message.
func (h *artifactHarness) turn() {
	h.t.Helper()
	h.srv.PersonPost(h.alias, "go on")
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "done"}}}})
	want(h.t, h.run(h.alias), OutcomeTurnCompleted, 0)
}

func (h *artifactHarness) write(rel, content string) {
	h.t.Helper()
	p := filepath.Join(h.outbox, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// object reads the artifact object published for rel.
func (h *artifactHarness) object(rel string) (artifactMeta, bool) {
	h.t.Helper()
	o, ok := h.srv.Get(h.alias + "/artifacts/" + rel)
	if !ok {
		return artifactMeta{}, false
	}
	var v struct {
		Type     string       `json:"type"`
		Artifact artifactMeta `json:"artifact"`
	}
	if err := json.Unmarshal(o.Value, &v); err != nil || v.Type != "artifact" {
		h.t.Fatalf("%s holds %s", rel, o.Value)
	}
	return v.Artifact, true
}

// oldArtifactPublished is what bhw-run called an artifact's item before it
// took blobhub-worker's artifacts_published: a journal an earlier version
// wrote may hold one.
const oldArtifactPublished = "artifact_published"

// announced lists the artifacts_published items (and those an earlier
// version journaled as artifact_published): alias → how many.
func (h *artifactHarness) announced() map[string]int {
	out := map[string]int{}
	for _, it := range h.srv.Items(h.alias) {
		var m struct {
			Type     string   `json:"type"`
			Aliases  []string `json:"aliases"`
			Artifact struct {
				Alias string `json:"alias"`
			} `json:"artifact"`
		}
		_ = json.Unmarshal(it.Metadata, &m)
		switch m.Type {
		case agent.ItemArtifactsPublished:
			for _, a := range m.Aliases {
				out[strings.TrimPrefix(a, h.alias+"/artifacts/")]++
			}
		case oldArtifactPublished:
			out[strings.TrimPrefix(m.Artifact.Alias, h.alias+"/artifacts/")]++
		}
	}
	return out
}

// skipped lists the paths of artifact_skipped status items.
func (h *artifactHarness) skipped() []string {
	var out []string
	for _, it := range h.srv.Items(h.alias) {
		var m struct {
			Status string `json:"status"`
			Path   string `json:"path"`
		}
		_ = json.Unmarshal(it.Metadata, &m)
		if m.Status == "artifact_skipped" {
			out = append(out, m.Path)
		}
	}
	return out
}

func (h *artifactHarness) notMine() setup.NotMine {
	h.t.Helper()
	var nm setup.NotMine
	b, _ := os.ReadFile(filepath.Join(h.setup().JobDir, "not_mine.yaml"))
	if err := yaml.Unmarshal(b, &nm); err != nil {
		h.t.Fatal(err)
	}
	return nm
}

func sha(s string) string { b := sha256.Sum256([]byte(s)); return hex.EncodeToString(b[:]) }

func TestArtifactsPublished(t *testing.T) {
	for _, local := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "file"}[local], func(t *testing.T) {
			h := newArtifactHarness(t, local)
			h.activate()
			if !h.thread(h.alias).Outbox.CreatedByUs {
				t.Fatal("outbox.created_by_us not recorded")
			}
			if b, err := os.ReadFile(filepath.Join(h.outbox, ".gitignore")); err != nil || string(b) != "*\n" {
				t.Fatalf(".gitignore %q, %v", b, err)
			}
			h.write("report.md", "# report\n")
			h.write("sub/data.bin", "\x00\x01\xff")
			h.turn()

			rep, ok := h.object("report.md")
			if !ok || rep.SHA256 != sha("# report\n") || rep.Data != "# report\n" || rep.Encoding != "utf-8" ||
				rep.Thread != h.alias || rep.Name != "report.md" || rep.Path != "report.md" || rep.MediaType != "text/markdown" || rep.Size != 9 {
				t.Fatalf("report.md object %+v", rep)
			}
			bin, ok := h.object("sub/data.bin")
			if !ok || bin.Encoding != "base64" || bin.Data != base64.StdEncoding.EncodeToString([]byte("\x00\x01\xff")) || bin.Name != "data.bin" {
				t.Fatalf("sub/data.bin object %+v", bin)
			}
			if _, ok := h.object(".gitignore"); ok {
				t.Fatal("the outbox's .gitignore was published")
			}
			if got := h.announced(); got["report.md"] != 1 || got["sub/data.bin"] != 1 || len(got) != 2 {
				t.Fatalf("announced %v", got)
			}
			items := h.items(h.alias)
			if items[len(items)-1] != "turn_end" {
				t.Fatalf("items %v: the announcements belong to the turn", items)
			}
			for _, it := range h.srv.Items(h.alias) {
				if strings.Contains(string(it.Metadata), "report.md") && it.Content[0].Text != "📎 report.md (9 B)" {
					t.Fatalf("brief %q", it.Content[0].Text)
				}
			}
			pub := h.published(h.alias)
			if pub["report.md"].SHA256 != sha("# report\n") || pub["report.md"].Alias != h.alias+"/artifacts/report.md" || pub["sub/data.bin"].SHA256 != sha("\x00\x01\xff") {
				t.Fatalf("artifacts.yaml %+v", pub)
			}
			if e := h.notMine().Aliases[h.alias+"/artifacts/report.md"]; e.Reason != "artifact" {
				t.Fatalf("not_mine.yaml entry %+v", e)
			}

			// Nothing changed: nothing new.
			h.turn()
			if got := h.announced(); len(got) != 2 || got["report.md"] != 1 || h.uploadsOf("report.md") != 1 {
				t.Fatalf("republished unchanged files: %v, %d uploads", got, h.uploadsOf("report.md"))
			}
			// A changed file is published once more, once.
			h.write("report.md", "# report v2\n")
			h.turn()
			h.turn()
			if got := h.announced(); got["report.md"] != 2 || got["sub/data.bin"] != 1 || h.uploadsOf("report.md") != 2 {
				t.Fatalf("after a change: announced %v, %d uploads", got, h.uploadsOf("report.md"))
			}
			if rep, _ := h.object("report.md"); rep.Data != "# report v2\n" || rep.SHA256 != sha("# report v2\n") {
				t.Fatalf("report.md not updated: %+v", rep)
			}
			// An idle run does not publish.
			h.write("late.txt", "late")
			want(t, h.run(h.alias), OutcomeIdle, 0)
			if _, ok := h.object("late.txt"); ok {
				t.Fatal("an idle run published")
			}
		})
	}
}

func TestArtifactsParkedTurnPublishesNothing(t *testing.T) {
	h := newArtifactHarness(t, false)
	h.activate()
	h.write("report.md", "x")
	h.srv.PersonPost(h.alias, "write it")
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Call: &agenttest.Tool{Effect: policy.EffectExec, Target: policy.Target{Command: "rm -rf /tmp/x"}, Result: "ok"}}}}})
	want(t, h.run(h.alias), OutcomeParked, 0)
	if _, ok := h.object("report.md"); ok || len(h.announced()) != 0 {
		t.Fatal("a parked turn published artifacts")
	}
}

func TestArtifactsSkipped(t *testing.T) {
	h := newArtifactHarness(t, false)
	h.cfg = "artifacts:\n  max_bytes: 10\n"
	h.writeConfig()
	h.activate()
	h.write("ok.txt", "fine")
	h.write("big.txt", "more than ten bytes")
	// Its alias would end in a reserved file name: never a valid alias.
	h.write("projects/p1/t2/thread.yaml", "alias: x")
	if err := os.Symlink("/etc/passwd", filepath.Join(h.outbox, "passwd")); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(secret, filepath.Join(h.outbox, "hard")); err != nil {
		t.Fatal("a hard link in the outbox:", err)
	}
	h.turn()
	if got := strings.Join(h.skipped(), ","); got != "big.txt,hard,passwd,projects/p1/t2/thread.yaml" {
		t.Fatalf("skipped %q", got)
	}
	for _, rel := range []string{"passwd", "hard", "big.txt"} {
		if _, ok := h.object(rel); ok {
			t.Fatalf("%s was published", rel)
		}
	}
	if _, ok := h.object("ok.txt"); !ok {
		t.Fatal("ok.txt was not published")
	}
}

func TestArtifactsNeverOverwriteForeignObjects(t *testing.T) {
	h := newArtifactHarness(t, false)
	h.activate()
	other := `{"type":"artifact","artifact":{"name":"a.md","path":"a.md","thread":"projects/p1/other","sha256":"x","data":"theirs"}}`
	note := `{"type":"note","note":"keep me"}`
	h.srv.Put(h.alias+"/artifacts/a.md", other)
	h.srv.Put(h.alias+"/artifacts/b.md", note)
	h.write("a.md", "mine")
	h.write("b.md", "mine")
	h.write("c.md", "mine")
	h.turn()
	if o, _ := h.srv.Get(h.alias + "/artifacts/a.md"); !jsonEqual(o.Value, []byte(other)) {
		t.Fatalf("another thread's artifact was overwritten: %s", o.Value)
	}
	if o, _ := h.srv.Get(h.alias + "/artifacts/b.md"); !jsonEqual(o.Value, []byte(note)) {
		t.Fatalf("a note was overwritten: %s", o.Value)
	}
	if got := strings.Join(h.skipped(), ","); got != "a.md,b.md" {
		t.Fatalf("skipped %q", got)
	}
	if got := h.announced(); len(got) != 1 || got["c.md"] != 1 {
		t.Fatalf("announced %v", got)
	}
	if h.uploadsOf("a.md")+h.uploadsOf("b.md") != 0 {
		t.Fatal("uploaded over a foreign object")
	}
	if _, ok := h.published(h.alias)["a.md"]; ok {
		t.Fatal("a skipped file was recorded as published")
	}
	if h.thread(h.alias).Agent.State != envelope.StateActive {
		t.Fatal("a skipped artifact failed the thread")
	}
}

func TestArtifactsKeepGitStatusClean(t *testing.T) {
	// git is required: the test fails without it, it never skips.
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is needed for this test:", err)
	}
	h := newArtifactHarness(t, false)
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = h.work
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	git("init", "-q")
	if err := os.WriteFile(filepath.Join(h.work, "main.go"), []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "main.go")
	git("commit", "-q", "-m", "first")
	h.activate()
	h.write("report.md", "r")
	h.turn()
	if _, ok := h.object("report.md"); !ok {
		t.Fatal("not published")
	}
	if st := git("status", "--porcelain", "--untracked-files=all"); st != "" {
		t.Fatalf("git status is not clean:\n%s", st)
	}
}

// journalArtifactIntent leaves an intent in the thread's journal, as a run
// killed right after journaling it would (between intent and announcement).
func (h *artifactHarness) journalArtifactIntent(rel, content string, announce bool) {
	h.t.Helper()
	dir := setup.ThreadDir(h.setup().JobDir, h.alias)
	th := h.thread(h.alias)
	j, err := openJournal(filepath.Join(dir, "emissions.jsonl"), th.EmissionNonce)
	if err != nil {
		h.t.Fatal(err)
	}
	defer j.closeFile()
	f := &outbox.File{Path: rel, Size: int64(len(content)), SHA256: sha(content), Data: []byte(content), MediaType: outbox.MediaType(rel), Encoding: "utf-8"}
	in, err := journalIntent(j, h.alias, h.work, artifactsSource, f)
	if err != nil {
		h.t.Fatal(err)
	}
	if announce {
		// Killed after journaling the announcement, before posting it: the
		// upload and the record happened.
		h.srv.Put(in.alias, string(mustJSON(map[string]any{"type": "artifact", "artifact": artifactMeta{
			Name: f.Name(), Path: rel, Size: f.Size, SHA256: f.SHA256, Thread: h.alias, Encoding: "utf-8", Data: content}})))
		pub := h.published(h.alias)
		pub[rel] = envelope.PublishedArtifact{SHA256: f.SHA256, Alias: in.alias}
		b, _ := yaml.Marshal(&envelope.Published{Published: pub})
		if err := statefile.WriteAtomic(filepath.Join(dir, publishedFile), b, 0o600); err != nil {
			h.t.Fatal(err)
		}
		if err := setup.AddNotMine(h.t.Context(), h.setup().JobDir, in.alias, "artifact"); err != nil {
			h.t.Fatal(err)
		}
		if _, err := j.addID(in.announceID, h.alias, agent.Item{Brief: "📎 " + rel, Meta: map[string]any{
			"type": oldArtifactPublished, "artifact": map[string]any{"name": f.Name(), "alias": in.alias, "sha256": f.SHA256, "size": f.Size},
		}}, ""); err != nil {
			h.t.Fatal(err)
		}
	}
}

func TestArtifactIntentReplay(t *testing.T) {
	for _, tc := range []struct {
		name     string
		journal  string // the bytes the intent was journaled with
		disk     string // the bytes on disk when the next run starts
		landed   bool   // the upload landed before the kill
		announce bool   // the announcement was journaled before the kill
		uploads  int
		want     string // the bytes published in the end
	}{
		{name: "nothing uploaded", journal: "v1", disk: "v1", uploads: 1, want: "v1"},
		{name: "upload landed", journal: "v1", disk: "v1", landed: true, uploads: 0, want: "v1"},
		{name: "changed on disk since", journal: "v1", disk: "v2", uploads: 1, want: "v2"},
		{name: "upload landed then changed on disk", journal: "v1", disk: "v2", landed: true, uploads: 0, want: "v1"},
		{name: "announcement journaled", journal: "v1", disk: "v1", announce: true, uploads: 0, want: "v1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newArtifactHarness(t, false)
			h.activate()
			h.journalArtifactIntent("r.md", tc.journal, tc.announce)
			if tc.landed {
				h.srv.Put(h.alias+"/artifacts/r.md", string(mustJSON(map[string]any{"type": "artifact", "artifact": artifactMeta{
					Name: "r.md", Path: "r.md", Size: int64(len(tc.journal)), SHA256: sha(tc.journal), Thread: h.alias, Encoding: "utf-8", Data: tc.journal}})))
			}
			h.write("r.md", tc.disk)
			// A normal run with nothing new finishes the unfinished upload.
			want(t, h.run(h.alias), OutcomeIdle, 0)
			want(t, h.run(h.alias), OutcomeIdle, 0)
			if got := h.uploadsOf("r.md"); got != tc.uploads {
				t.Fatalf("%d uploads, want %d", got, tc.uploads)
			}
			if got := h.announced(); len(got) != 1 || got["r.md"] != 1 {
				t.Fatalf("announced %v, want r.md once", got)
			}
			obj, ok := h.object("r.md")
			if !ok || obj.Data != tc.want {
				t.Fatalf("object %+v, want data %q", obj, tc.want)
			}
			if got := h.published(h.alias)["r.md"].SHA256; got != sha(tc.want) {
				t.Fatalf("artifacts.yaml records %s, want the sha256 of %q", got, tc.want)
			}
			if e := h.notMine().Aliases[h.alias+"/artifacts/r.md"]; e.Reason != "artifact" {
				t.Fatalf("not_mine.yaml entry %+v", e)
			}
			// A later completed turn publishes the bytes on disk only if they
			// are not the ones published.
			h.turn()
			wantAnn := 1
			if tc.disk != tc.want {
				wantAnn = 2
			}
			if got := h.announced(); got["r.md"] != wantAnn {
				t.Fatalf("after a later turn announced %v, want r.md %d time(s)", got, wantAnn)
			}
		})
	}
}

func TestArtifactUploadFailures(t *testing.T) {
	h := newArtifactHarness(t, false)
	h.activate()
	h.write("a.txt", "a")
	h.write("b.txt", "b")
	h.write("c.txt", "c")
	// a.txt is refused for good; b.txt finds BlobHub unreachable.
	h.mu.Lock()
	h.fail["a.txt"] = &blobhub.APIError{Status: 413, Message: "too large"}
	h.fail["b.txt"] = &blobhub.OpError{Command: "upload_session_object", Err: blobhub.ErrUnavailable}
	h.mu.Unlock()
	h.srv.PersonPost(h.alias, "go on")
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "done"}}}})
	sum := h.run(h.alias)
	if sum.ExitCode != exit.TempFail {
		t.Fatalf("exit %d (%+v), want %d: an upload is left for the next run", sum.ExitCode, sum.Error, exit.TempFail)
	}
	if got := strings.Join(h.skipped(), ","); got != "a.txt" {
		t.Fatalf("skipped %q, want a.txt", got)
	}
	if got := h.announced(); len(got) != 0 {
		t.Fatalf("announced %v before b.txt was uploaded", got)
	}
	h.mu.Lock()
	delete(h.fail, "b.txt")
	h.mu.Unlock()
	// The next run finishes b.txt and c.txt, in order, without a turn.
	want(t, h.run(h.alias), OutcomeIdle, 0)
	if got := h.announced(); len(got) != 2 || got["b.txt"] != 1 || got["c.txt"] != 1 {
		t.Fatalf("announced %v, want b.txt and c.txt once", got)
	}
	if _, ok := h.object("a.txt"); ok {
		t.Fatal("a refused file was published")
	}
	if n := count(h.items(h.alias), "turn_end"); n != 1 {
		t.Fatalf("%d turn_end items, want 1", n)
	}
}

// TestPublishedOffTheIdlePath: what a thread has published is kept in
// artifacts.yaml, not in thread.yaml, which every run reads and which would
// otherwise grow with every file the thread ever published; an idle run
// does not read it (a broken one does not stop it), and the turn that would
// publish says which file to fix instead of publishing everything again.
func TestPublishedOffTheIdlePath(t *testing.T) {
	h := newArtifactHarness(t, false)
	h.activate()
	for i := range 3 {
		h.write(fmt.Sprintf("r%d.md", i), fmt.Sprintf("report %d\n", i))
		h.turn()
	}
	dir := setup.ThreadDir(h.setup().JobDir, h.alias)
	raw, err := os.ReadFile(filepath.Join(dir, "thread.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("r0.md")) || len(h.thread(h.alias).Artifacts.Published) != 0 {
		t.Fatalf("thread.yaml records the published artifacts:\n%s", raw)
	}
	if pub := h.published(h.alias); len(pub) != 3 || pub["r2.md"].SHA256 != sha("report 2\n") {
		t.Fatalf("artifacts.yaml %+v", pub)
	}
	if err := os.WriteFile(filepath.Join(dir, publishedFile), []byte("published: [unclosed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	want(t, h.run(h.alias), OutcomeIdle, exit.OK)
	h.write("r3.md", "report 3\n")
	h.turn()
	if got := h.skipped(); !slices.Equal(got, []string{""}) {
		t.Fatalf("skipped %q, want one item for the outbox", got)
	}
	if got := h.announced(); len(got) != 3 {
		t.Fatalf("announced %v: published again without knowing what was", got)
	}
}
