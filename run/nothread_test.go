package run

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/setup"
	"github.com/blobhub/bhw-run/statefile"
)

// The tests of this file cover invalid_thread_envelope, BlobHub's
// documented answer of post and list for an alias that does not exist or
// is not a thread: a job thread deleted while its run posts to it, and the
// worker thread deleted while a run posts thread_failed to it.

func metaType(p blobhub.NewItem) string {
	var m struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(p.Metadata, &m)
	return m.Type
}

// TestThreadDeletedMidTurn: a thread deleted while its turn runs stops the
// agent — it would go on working in the folder and spending on a turn
// nobody can read — and ends the run THREAD_NOT_FOUND (66), not
// turn_completed 0, with every item it could not post still journaled,
// none dropped, the turn ended (not resumed by a later run); once a person
// makes the thread again, the next run posts them.
func TestThreadDeletedMidTurn(t *testing.T) {
	h := newHarness(t, false)
	const alias = "gone/mid-turn"
	h.handOff(alias, "approval", "hello")
	// After its second text the agent works on until it is interrupted
	// (the harness's stall timeout and max duration are a minute).
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "one"}, {Text: "two"}, {WaitInterrupt: true}}}})
	var posts []string
	h.runner = func(r *Runner) {
		r.Client = &hookClient{Client: r.Client, onPost: func(a string, p blobhub.NewItem) {
			posts = append(posts, metaType(p))
			if a == alias && metaType(p) == "text" && len(posts) == 2 {
				h.srv.Delete(alias) // the person deletes the thread after the first text
			}
		}}
	}
	start := time.Now()
	sum := h.run(alias)
	wantExitCode(t, sum, exit.NoThread, exit.CodeNoThread)
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("the run took %s: the agent was not stopped", d)
	}
	if !strings.Contains(sum.Error.Message, "journaled") || !strings.Contains(sum.Error.Message, "stopped") {
		t.Fatalf("message %q does not say the agent was stopped and the items are kept", sum.Error.Message)
	}
	if th := h.thread(alias); th.Turn.State != envelope.TurnStateIdle || th.Agent.Process != nil {
		t.Fatalf("turn %q process %v, want an ended turn", th.Turn.State, th.Agent.Process)
	}
	dir := setup.ThreadDir(h.setup().JobDir, alias)
	j, err := readJournal(filepath.Join(dir, "emissions.jsonl"), h.thread(alias).EmissionNonce)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, e := range j.pending() {
		kept = append(kept, e.Item.Type())
	}
	if !slices.Equal(kept, []string{"text", "turn_end"}) {
		t.Fatalf("journaled %v, want the second text and turn_end the deleted thread never got", kept)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "emissions.jsonl"))
	if strings.Contains(string(b), `"dropped"`) {
		t.Fatalf("the journal dropped items:\n%s", b)
	}
	// No more posts after the thread was found gone.
	if n := len(posts); n != 2 {
		t.Fatalf("%d posts %v, want 2 (the second found the thread gone)", n, posts)
	}

	// Gone: the next run says so and keeps them.
	wantExitCode(t, h.run(alias), exit.NoThread, exit.CodeNoThread)

	// Made again: the next run posts what it kept.
	v, _ := envelope.WithState(envelope.NewThread(h.work, testAgent, "approval", alias), envelope.StateActive)
	h.srv.Put(alias, string(v))
	want(t, h.run(alias), OutcomeIdle, 0)
	if got := h.items(alias); !slices.Equal(got, []string{"text", "turn_end"}) {
		t.Fatalf("items of the thread made again %v", got)
	}
}

// listOnlyGone serves alias's envelope on download while the store holds
// no such thread: the thread was deleted between the run's download and
// its read of the items.
type listOnlyGone struct {
	blobhub.Client
	alias string
	value json.RawMessage
}

func (c *listOnlyGone) Download(ctx context.Context, alias string) (blobhub.Object, error) {
	if alias == c.alias {
		return blobhub.Object{Alias: alias, Value: c.value}, nil
	}
	return c.Client.Download(ctx, alias)
}

// TestThreadGoneOnRead: invalid_thread_envelope on a read is THREAD_NOT_FOUND
// (66) in a run, never 75 "try again later"; `ls` skips a thread deleted
// since its listing.
func TestThreadGoneOnRead(t *testing.T) {
	h := newHarness(t, false)
	const alias = "gone/read"
	h.runner = func(r *Runner) {
		r.Client = &listOnlyGone{Client: r.Client, alias: alias, value: envelope.NewThread(h.work, testAgent, "approval", alias)}
	}
	wantExitCode(t, h.run(alias), exit.NoThread, exit.CodeNoThread)

	// `thread show`'s part: the main package's TestThreadShowNotAThread.

	// ls: an active job thread downloads (its envelope still served), then
	// its items answer invalid_thread_envelope: it was deleted since the
	// listing. ls goes on with the other threads.
	f := newLsFixture(t, "")
	active, _ := envelope.WithState(envelope.NewThread(h.work, testAgent, "approval", alias), envelope.StateActive)
	f.srv.Put(alias, string(active))
	f.srv.Put("gone/other", string(envelope.NewThread(h.work, testAgent, "approval", "gone/other")))
	dir := setup.ThreadDir(f.s.JobDir, alias)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := statefile.WriteAtomic(filepath.Join(dir, "thread.yaml"), []byte("alias: "+alias+"\nagent: {state: active, agent_session_id: s1}\nworkspace: {agent_type: claude_code, work_folder: "+h.work+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	gone := &deleteAfterList{Client: f.srv.Client(bhtest.RunnerKey), srv: f.srv, alias: alias}
	r := &Runner{Setup: f.s, Client: &listOnlyGone{Client: gone, alias: alias, value: active}, Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))}
	list, err := r.List(t.Context(), ListOptions{})
	if err != nil {
		t.Fatalf("ls with a thread deleted since its listing: %v", err)
	}
	var aliases []string
	for _, l := range list {
		aliases = append(aliases, l.Alias)
	}
	if !slices.Equal(aliases, []string{"gone/other"}) {
		t.Fatalf("ls listed %v, want only gone/other", aliases)
	}
}

// deleteAfterList deletes alias from the store right after the session's
// objects are listed, keeping its envelope served on download.
type deleteAfterList struct {
	blobhub.Client
	srv   *bhtest.Server
	alias string
}

func (c *deleteAfterList) List(ctx context.Context) ([]string, error) {
	l, err := c.Client.List(ctx)
	c.srv.Delete(c.alias)
	return l, err
}

// TestWorkerDeletedBeforeThreadFailed: a worker object deleted while a
// run works is made again when thread_failed finds it gone, and the item
// is posted to it, not dropped.
func TestWorkerDeletedBeforeThreadFailed(t *testing.T) {
	h := newHarness(t, false)
	const alias = "gone/worker"
	h.handOff(alias, "approval", "hello")
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "hi"}, {Crash: 3}}}})
	deleted := false
	h.runner = func(r *Runner) {
		r.Client = &hookClient{Client: r.Client, onPost: func(a string, p blobhub.NewItem) {
			if metaType(p) == agent.ItemThreadFailed && !deleted {
				deleted = true
				h.srv.Delete("worker")
			}
		}}
	}
	sum := h.run(alias)
	wantExitCode(t, sum, exit.Failed, agent.CodeAgentCrashed)
	w, ok := h.srv.Get("worker")
	if !ok {
		t.Fatal("the worker object was not made again")
	}
	var wv map[string]any
	_ = json.Unmarshal(w.Value, &wv)
	if dig(wv, "thread", "metadata", "user", "user_id") != bhtest.RunnerUserID {
		t.Fatalf("worker made again as %s", w.Value)
	}
	if got := h.items("worker"); !slices.Equal(got, []string{agent.ItemThreadFailed}) {
		t.Fatalf("worker items %v, want the thread_failed", got)
	}
	if n := h.unpostedCount(alias); n != 0 {
		t.Fatalf("%d items left unposted", n)
	}
}

func (h *harness) unpostedCount(alias string) int {
	h.t.Helper()
	j, err := readJournal(filepath.Join(setup.ThreadDir(h.setup().JobDir, alias), "emissions.jsonl"), h.thread(alias).EmissionNonce)
	if err != nil {
		h.t.Fatal(err)
	}
	return len(j.pending())
}

// TestParkedThreadFailsResolvesPrompt: a parked thread that fails later
// (its work folder removed before the answer is delivered) resolves its
// open pending_prompt with the documented resolution: failed, instead of
// leaving it open for ever.
func TestParkedThreadFailsResolvesPrompt(t *testing.T) {
	h := newHarness(t, false)
	const alias = "gone/parked"
	h.handOffWrite(alias, "write x.txt")
	want(t, h.run(alias), OutcomeParked, 0)
	prompt := h.thread(alias).Prompt
	if prompt == nil || prompt.ItemID == "" {
		t.Fatal("not parked")
	}
	if err := os.RemoveAll(h.work); err != nil {
		t.Fatal(err)
	}
	h.srv.PersonPost(alias, "yes")
	sum := h.run(alias)
	wantExitCode(t, sum, exit.Failed, "WORK_FOLDER_NOT_FOUND")
	if h.thread(alias).Prompt != nil {
		t.Fatal("the prompt is still open in thread.yaml")
	}
	var resolved []map[string]any
	for _, it := range h.srv.Items(alias) {
		var m map[string]any
		_ = json.Unmarshal(it.Metadata, &m)
		if m["type"] == agent.ItemPendingPromptResolved {
			resolved = append(resolved, m)
		}
	}
	if len(resolved) != 1 || resolved[0]["resolution"] != "failed" || resolved[0]["prompt_item_id"] != prompt.ItemID {
		t.Fatalf("pending_prompt_resolved %v, want one, resolution failed, for %s", resolved, prompt.ItemID)
	}
	// retry → pending: the activation finds no prompt to cancel again.
	if err := os.MkdirAll(h.work, 0o700); err != nil {
		t.Fatal(err)
	}
	h.setWireState(alias, envelope.StatePending) // thread retry
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "again"}}}})
	want(t, h.run(alias), OutcomeTurnCompleted, 0)
	if n := count(h.items(alias), agent.ItemPendingPromptResolved); n != 1 {
		t.Fatalf("%d pending_prompt_resolved after the retry, want 1", n)
	}
}

// TestThreadDeletedBeforeActivation: a pending thread deleted between the
// run's download and its write of instance.state is THREAD_NOT_FOUND (66),
// not "try later".
func TestThreadDeletedBeforeActivation(t *testing.T) {
	h := newHarness(t, false)
	const alias = "gone/activation"
	h.handOff(alias, "approval", "")
	h.runner = func(r *Runner) {
		r.Client = &deleteOnSecondDownload{Client: r.Client, srv: h.srv, alias: alias}
	}
	wantExitCode(t, h.run(alias), exit.NoThread, exit.CodeNoThread)
}

// deleteOnSecondDownload deletes alias just before its second download:
// it is gone when the run comes back to set instance.state.
type deleteOnSecondDownload struct {
	blobhub.Client
	srv   *bhtest.Server
	alias string
	n     int
}

func (c *deleteOnSecondDownload) Download(ctx context.Context, alias string) (blobhub.Object, error) {
	if alias == c.alias {
		if c.n++; c.n == 2 {
			c.srv.Delete(alias)
		}
	}
	return c.Client.Download(ctx, alias)
}
