package run

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/lock"
	"github.com/blobhub/bhw-run/redact"
	"github.com/blobhub/bhw-run/setup"
)

// lsFixture is a state tree and a BlobHub built by writing straight to
// the store and to thread.yaml, as earlier runs would have left them.
type lsFixture struct {
	*harness
	s *setup.Setup
}

func newLsFixture(t *testing.T, prefix string) *lsFixture {
	h := newHarness(t, false)
	f := &lsFixture{harness: h, s: h.setup()}
	f.s.Section.SessionPrefix = prefix
	id := []byte("user_id: " + bhtest.RunnerUserID + "\n")
	if err := os.WriteFile(filepath.Join(f.s.StateDir, "identity.yaml"), id, 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *lsFixture) list(o ListOptions) []Listing {
	f.t.Helper()
	r := &Runner{Setup: f.s, Client: f.client(), Logger: slog.New(slog.NewTextHandler(testWriter{f.t}, nil))}
	out, err := r.List(context.Background(), o)
	if err != nil {
		f.t.Fatalf("ls: %v", err)
	}
	return out
}

// thread puts a job thread with instance.state (none: no instance).
func (f *lsFixture) thread(alias, state string) {
	v := map[string]any{"type": "thread", "thread": map[string]any{"metadata": map[string]any{
		"workspace": map[string]any{"work_folder": f.work},
		"agent":     map[string]any{"type": testAgent},
	}}}
	if state != StateNone {
		v["thread"].(map[string]any)["metadata"].(map[string]any)["instance"] = map[string]any{"state": state}
	}
	b, _ := json.Marshal(v)
	f.srv.Put(alias, string(b))
}

// local writes thread.yaml as an earlier run would have left it.
func (f *lsFixture) local(alias, state string, edit func(*envelope.Thread)) {
	f.t.Helper()
	th := &envelope.Thread{Alias: alias, EmissionNonce: "n0"}
	th.Workspace = envelope.Workspace{AgentType: testAgent, WorkFolder: f.work}
	th.Agent.State, th.Agent.AgentSessionID = state, "sess-"+strings.ReplaceAll(alias, "/", "-")
	th.Turn.State = envelope.TurnStateIdle
	if edit != nil {
		edit(th)
	}
	b, err := yaml.Marshal(th)
	if err != nil {
		f.t.Fatal(err)
	}
	dir := setup.ThreadDir(f.s.JobDir, alias)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "thread.yaml"), b, 0o600); err != nil {
		f.t.Fatal(err)
	}
}

// runnerPost stores an item of the runner's (a prompt, a turn_end).
func (f *lsFixture) runnerPost(alias, typ string) blobhub.Item {
	return f.srv.PostAs(bhtest.RunnerUserID, bhtest.SessionID, alias, blobhub.NewItem{
		Content: []blobhub.Block{{Type: "text", Text: typ}}, Metadata: json.RawMessage(`{"type":"` + typ + `"}`)})
}

func scannedAt(it blobhub.Item) envelope.Scanned {
	return envelope.Scanned{CreatedAt: it.CreatedAt, IDs: []string{it.ID}}
}

// snapshot is every file under dir with its bytes and modification time.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	return walk(t, dir, func(p string, info fs.FileInfo) string {
		if info.IsDir() {
			return "dir"
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%s@%d", b, info.ModTime().UnixNano())
	})
}

// TestLsTable lists one thread of every kind: which are listed with which
// state and row, which --runnable prints, and that ls writes no thread.yaml.
func TestLsTable(t *testing.T) {
	f := newLsFixture(t, "t/")
	type want struct {
		state, row string
		runnable   bool // printed by --runnable
	}
	cases := map[string]want{}
	add := func(alias, state, row string, runnable bool) { cases[alias] = want{state, row, runnable} }
	// plain adds a thread in state wire on the wire, in state local here
	// (none here when local is empty), and nothing else: listed in wire.
	plain := func(alias, wire, local, row string, runnable bool) {
		f.thread(alias, wire)
		if local != "" {
			f.local(alias, local, nil)
		}
		add(alias, wire, row, runnable)
	}

	f.thread("t/pending", "pending")
	f.srv.PersonPost("t/pending", "start")
	add("t/pending", "pending", "activate", true)

	// Pending, but a run holds its lock right now.
	f.thread("t/pending-locked", "pending")
	lk, err := lock.Acquire(context.Background(), filepath.Join(setup.ThreadDir(f.s.JobDir, "t/pending-locked"), "thread.lock"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock()
	add("t/pending-locked", "pending", "activate", false)

	plain("t/not-here", "active", "", "not_here", false)

	// Active here, everything read: nothing to do.
	f.thread("t/idle", "active")
	end := f.runnerPost("t/idle", "turn_end")
	f.local("t/idle", "active", func(th *envelope.Thread) { th.Items.Scanned = scannedAt(end) })
	add("t/idle", "active", "turn", false)

	// Active here, a person wrote after scanned.
	f.thread("t/inbound", "active")
	end = f.runnerPost("t/inbound", "turn_end")
	f.local("t/inbound", "active", func(th *envelope.Thread) { th.Items.Scanned = scannedAt(end) })
	f.srv.PersonPost("t/inbound", "more please")
	add("t/inbound", "active", "turn", true)

	// Active here, an item read by an earlier idle run, not yet delivered.
	f.thread("t/pending-inbound", "active")
	in := f.srv.PersonPost("t/pending-inbound", "read, not delivered")
	f.local("t/pending-inbound", "active", func(th *envelope.Thread) {
		th.Items.Scanned = scannedAt(in)
		th.Items.PendingInbound = []envelope.InboundItem{{ID: in.ID, CreatedAt: in.CreatedAt, UserID: in.UserID}}
	})
	add("t/pending-inbound", "active", "turn", true)

	// Active, no agent session yet, a person wrote: a fresh session.
	f.thread("t/fresh", "active")
	in = f.srv.PersonPost("t/fresh", "hello")
	f.local("t/fresh", "active", func(th *envelope.Thread) { th.Agent.AgentSessionID = "" })
	add("t/fresh", "active", "fresh", true)

	// Parked on a person: no answer, then an answer after the prompt.
	for _, answered := range []bool{false, true} {
		alias := "t/parked"
		if answered {
			alias = "t/parked-answered"
		}
		f.thread(alias, "active")
		p := f.runnerPost(alias, "pending_prompt")
		f.local(alias, "active", func(th *envelope.Thread) {
			th.Prompt = &envelope.Prompt{Kind: "approval", ItemID: p.ID, EmissionID: "n0:1", CreatedAt: p.CreatedAt}
			th.Items.Scanned = scannedAt(p)
		})
		if answered {
			f.srv.PersonPost(alias, "yes")
		}
		add(alias, "active", "parked", answered)
	}

	// A turn was running when the last run died.
	f.thread("t/running", "active")
	f.local("t/running", "active", func(th *envelope.Thread) {
		th.Turn.State = envelope.TurnStateRunning
		th.Turn.InboundIDs = []string{"itm_x"}
	})
	add("t/running", "active", "recover", true)

	// The person stopped a thread that is active here.
	plain("t/stopped", "completed", "active", "stop", true)

	plain("t/done", "completed", "completed", "final", false)
	plain("t/failed", "failed", "", "final", false)

	// Unfinished work: failed here but not yet on the wire.
	plain("t/fail-unposted", "active", "failed", "local_done", true)

	// Unfinished work: a journaled emission never confirmed.
	plain("t/journal", "completed", "completed", "final", true)
	line := `{"emission":{"emission_id":"n0:1","target":"t/journal","item":{"brief":"x","meta":{"type":"text"}}}}` + "\n"
	if err := os.WriteFile(filepath.Join(setup.ThreadDir(f.s.JobDir, "t/journal"), "emissions.jsonl"), []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}

	plain("t/no-instance", StateNone, "", "no_instance", false)

	// Not listed: the worker, objects outside the prefix, non-jobs, a
	// thread without an agent block, and the artifacts of a job thread.
	f.srv.Put("worker", `{"type":"thread","thread":{"metadata":{"user":{"user_id":"usr_runner"}}}}`)
	f.thread("other/x", "pending")
	f.srv.Put("t/note", `{"type":"note","note":"hi"}`)
	f.srv.Put("t/report", `{"type":"artifact","artifact":{"name":"r.md"}}`)
	f.srv.Put("t/chat", `{"type":"thread","thread":{"metadata":{}}}`)
	f.srv.Put("t/pending/artifacts/out.md", `{"type":"artifact","artifact":{"name":"out.md"}}`)

	before := snapshot(t, filepath.Join(f.s.JobDir, "threads"))
	f.srv.ResetCounts()
	all := f.list(ListOptions{})
	got := map[string]Listing{}
	for _, l := range all {
		got[l.Alias] = l
	}
	for alias, w := range cases {
		l, ok := got[alias]
		if !ok {
			t.Errorf("%s: not listed", alias)
			continue
		}
		wantRunnable := w.runnable || alias == "t/pending-locked"
		if l.State != w.state || l.Row != w.row || l.Runnable != wantRunnable {
			t.Errorf("%s: state %q row %q runnable %v, want %q %q %v", alias, l.State, l.Row, l.Runnable, w.state, w.row, wantRunnable)
		}
	}
	if len(all) != len(cases) {
		t.Errorf("listed %d threads, want %d: %+v", len(all), len(cases), all)
	}
	// Every job thread is downloaded once, the three non-jobs once each;
	// the worker, other/x and the artifact under t/pending never.
	if n := f.srv.Count("download_session_object"); n != len(cases)+3 {
		t.Errorf("%d downloads, want %d", n, len(cases)+3)
	}

	runnable := f.list(ListOptions{Runnable: true})
	var names []string
	for _, l := range runnable {
		names = append(names, l.Alias)
	}
	slices.Sort(names) // TestLsRunnableOldestFirst checks the order
	var wantNames []string
	for alias, w := range cases {
		if w.runnable {
			wantNames = append(wantNames, alias)
		}
	}
	slices.Sort(wantNames)
	if !slices.Equal(names, wantNames) {
		t.Errorf("--runnable printed %v, want %v", names, wantNames)
	}

	if after := snapshot(t, filepath.Join(f.s.JobDir, "threads")); !mapsEqual(before, after) {
		t.Errorf("ls changed the threads folder:\nbefore %v\nafter  %v", keys(before), keys(after))
	}

	// The non-jobs are cached, the plain thread never; a second ls
	// downloads only the thread without an agent block among them.
	nm := setup.LoadNotMine(f.s.JobDir)
	if nm.Aliases["t/note"].Reason != "type note" || nm.Aliases["t/report"].Reason != setup.ReasonArtifact {
		t.Errorf("not_mine.yaml: %+v", nm.Aliases)
	}
	if _, ok := nm.Aliases["t/chat"]; ok {
		t.Error("a thread object was cached in not_mine.yaml")
	}
	f.srv.ResetCounts()
	f.list(ListOptions{States: []string{"pending"}})
	if n := f.srv.Count("download_session_object"); n != len(cases)+1 {
		t.Errorf("second ls: %d downloads, want %d", n, len(cases)+1)
	}

	// A day later, the note is checked again; the artifact is not.
	old := blobhub.FormatTime(time.Now().Add(-25 * time.Hour))
	nm.Aliases["t/note"] = setup.NotMineEntry{Reason: "type note", UpdatedAt: old}
	nm.Aliases["t/report"] = setup.NotMineEntry{Reason: setup.ReasonArtifact, UpdatedAt: old}
	b, _ := yaml.Marshal(&nm)
	if err := os.WriteFile(filepath.Join(f.s.JobDir, "not_mine.yaml"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	f.srv.ResetCounts()
	pend := f.list(ListOptions{States: []string{"pending", "failed"}})
	if n := f.srv.Count("download_session_object"); n != len(cases)+2 {
		t.Errorf("after a day: %d downloads, want %d", n, len(cases)+2)
	}
	var states []string
	for _, l := range pend {
		states = append(states, l.Alias+"="+l.State)
	}
	if want := []string{"t/failed=failed", "t/pending=pending", "t/pending-locked=pending"}; !slices.Equal(states, want) {
		t.Errorf("--state pending,failed: %v, want %v", states, want)
	}

	// One section.log record per listing.
	log, err := os.ReadFile(filepath.Join(f.s.JobDir, "logs", "section.log"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(log, []byte(`"event":"ls"`)); n != 4 {
		t.Errorf("section.log holds %d ls records, want 4:\n%s", n, log)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestLsSessionNotFound: a local store's session never written lists
// nothing; on BlobHub a missing session is SESSION_NOT_FOUND (78).
func TestLsSessionNotFound(t *testing.T) {
	for _, local := range []bool{true, false} {
		h := newHarness(t, local)
		r := &Runner{Setup: h.setup(), Client: h.client(), Logger: slog.New(slog.DiscardHandler)}
		out, err := r.List(context.Background(), ListOptions{})
		if local {
			if err != nil || len(out) != 0 {
				t.Errorf("file://: %v %v, want nothing and no error", out, err)
			}
			continue
		}
		ee, ok := err.(*exit.Error)
		if !ok || ee.Exit != exit.Config || ee.Code != exit.CodeSessionNotFound {
			t.Errorf("http: %v, want SESSION_NOT_FOUND exit 78", err)
		}
	}
}

// TestLsCost: 1,000 threads (some active here) and 5,000 artifact objects
// cached in not_mine.yaml cost 6 + N_jobs + N_active × pages requests: the
// listing's six pages of at most 1,000 objects, a download per job thread,
// and the items of each thread active here.
func TestLsCost(t *testing.T) {
	const (
		threads     = 1000
		activeHere  = 100 // active on the wire and here
		withInbound = 10  // of those, with a person item after scanned (2 pages)
		notHere     = 50  // active on the wire, no record here
		artifacts   = 5000
	)
	f := newLsFixture(t, "p/")
	type obj struct{ alias, value string }
	var objs []obj
	jobValue := func(state string) string {
		return fmt.Sprintf(`{"type":"thread","thread":{"metadata":{"workspace":{"work_folder":%q},"agent":{"type":"test_agent"},"instance":{"state":%q}}}}`, f.work, state)
	}
	alias := func(i int) string { return fmt.Sprintf("p/t%04d", i) }
	wantRunnable := 0
	for i := range threads {
		state := "completed"
		switch {
		case i < activeHere+notHere:
			state = "active"
		case i%3 == 0:
			state = "pending"
			wantRunnable++
		}
		objs = append(objs, obj{alias(i), jobValue(state)})
	}
	nm := setup.NotMine{Aliases: map[string]setup.NotMineEntry{}}
	at := blobhub.FormatTime(time.Now())
	for i := range artifacts {
		// Half under the job threads' artifacts/, half elsewhere.
		a := fmt.Sprintf("p/reports/r%05d.md", i)
		if i%2 == 0 {
			a = fmt.Sprintf("%s/artifacts/f%d.md", alias(i%threads), i)
		}
		objs = append(objs, obj{a, `{"type":"artifact","artifact":{"name":"f.md"}}`})
		nm.Aliases[a] = setup.NotMineEntry{Reason: setup.ReasonArtifact, UpdatedAt: at}
	}
	// Straight to the store, in parallel: each write is an fsynced rename.
	var wg sync.WaitGroup
	ch := make(chan obj)
	for range 16 {
		wg.Go(func() {
			for o := range ch {
				if err := f.srv.Store().Upload(context.Background(), bhtest.SessionID, o.alias, json.RawMessage(o.value)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for _, o := range objs {
		ch <- o
	}
	close(ch)
	wg.Wait()
	if err := os.MkdirAll(f.s.JobDir, 0o700); err != nil {
		t.Fatal(err)
	}
	b, _ := yaml.Marshal(&nm)
	if err := os.WriteFile(filepath.Join(f.s.JobDir, "not_mine.yaml"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range activeHere {
		f.local(alias(i), "active", nil)
		if i < withInbound {
			f.srv.PersonPost(alias(i), "news")
			wantRunnable++
		}
	}

	for _, runnable := range []bool{false, true} {
		f.srv.ResetCounts()
		out := f.list(ListOptions{Runnable: runnable})
		n, cmds := f.srv.Requests()
		const listPages = (threads + artifacts + 999) / 1000
		want := listPages + threads + (activeHere-withInbound)*1 + withInbound*2
		if runnable {
			// The head of the feed, read before the first full listing
			// back to feedOverlap before its newest event (feed.go): how
			// many of the fixture's uploads and posts fall in that overlap
			// depends on how fast this machine made them, so between one
			// page and every page of them.
			head := f.srv.Count(blobhub.CmdListEvents)
			const events = threads + artifacts + withInbound
			if most := (events + blobhub.MaxListLimit - 1) / blobhub.MaxListLimit; head < 1 || head > most {
				t.Errorf("the first pass read %d pages of the feed's head, want 1 to %d", head, most)
			}
			want += head
		}
		if n != want {
			counts := map[string]int{}
			for _, c := range cmds {
				counts[c]++
			}
			t.Errorf("runnable=%v: %d requests, want %d + %d + %d×1 + %d×2 = %d (%v)", runnable, n, listPages, threads, activeHere-withInbound, withInbound, want, counts)
		}
		wantLen := threads
		if runnable {
			wantLen = wantRunnable
		}
		if len(out) != wantLen {
			t.Errorf("runnable=%v: %d listed, want %d", runnable, len(out), wantLen)
		}
	}
}

// TestLsRunnableOldestFirst: --runnable lists the thread whose person has
// waited longest first, whatever its alias and however busy the others are:
// an interrupted turn's message, a message read before, a parked thread's
// answer, a pending thread's hand-off, a stop, each by its own time.
func TestLsRunnableOldestFirst(t *testing.T) {
	f := newLsFixture(t, "q/")
	base := time.Now().Add(-time.Hour).UTC().Truncate(time.Microsecond)
	at := func(m int) string { return blobhub.FormatTime(base.Add(time.Duration(m) * time.Minute)) }
	readFrom := func(th *envelope.Thread) { th.Items.Scanned = envelope.Scanned{CreatedAt: at(-60)} }

	// A turn left running, its message the oldest of all.
	f.thread("q/z-recover", "active")
	f.local("q/z-recover", "active", func(th *envelope.Thread) {
		readFrom(th)
		th.Turn.State = envelope.TurnStateRunning
		th.Turn.InboundIDs = []string{"itm_r"}
		th.Turn.Inbound = []envelope.InboundItem{{ID: "itm_r", CreatedAt: at(0), UserID: bhtest.PersonUserID}}
	})
	// A quiet thread: one message, long ago.
	f.thread("q/y-quiet", "active")
	f.local("q/y-quiet", "active", readFrom)
	f.srv.PostAt("q/y-quiet", at(10), "one question")
	// Parked, answered after the prompt.
	f.thread("q/x-parked", "active")
	f.local("q/x-parked", "active", func(th *envelope.Thread) {
		readFrom(th)
		th.Prompt = &envelope.Prompt{Kind: "approval", ItemID: "itm_p", EmissionID: "n0:1", CreatedAt: at(15)}
	})
	f.srv.PostAt("q/x-parked", at(20), "yes")
	// Handed off now: its envelope's updated_at.
	f.thread("q/w-pending", "pending")
	f.srv.PersonPost("q/w-pending", "start")
	// A busy thread: messages keep coming, all after the hand-off above.
	f.thread("q/a-busy", "active")
	f.local("q/a-busy", "active", readFrom)
	for _, m := range []string{"one", "two", "three"} {
		f.srv.PersonPost("q/a-busy", m)
	}
	// Stopped last.
	f.thread("q/b-stopped", "completed")
	f.local("q/b-stopped", "active", nil)

	out := f.list(ListOptions{Runnable: true})
	var names []string
	for _, l := range out {
		names = append(names, l.Alias)
	}
	wantOrder := []string{"q/z-recover", "q/y-quiet", "q/x-parked", "q/w-pending", "q/a-busy", "q/b-stopped"}
	if !slices.Equal(names, wantOrder) {
		t.Fatalf("--runnable order %v, want the oldest waiting first %v", names, wantOrder)
	}
	since := map[string]string{}
	for _, l := range out {
		since[l.Alias] = l.WaitingSince
	}
	for alias, want := range map[string]string{"q/z-recover": at(0), "q/y-quiet": at(10), "q/x-parked": at(20)} {
		if since[alias] != want {
			t.Errorf("%s: waiting_since %q, want %q", alias, since[alias], want)
		}
	}
	pend, _ := f.srv.Get("q/w-pending")
	if since["q/w-pending"] != pend.UpdatedAt {
		t.Errorf("q/w-pending: waiting_since %q, want the envelope's updated_at %q", since["q/w-pending"], pend.UpdatedAt)
	}
	busy := f.srv.Items("q/a-busy")
	if since["q/a-busy"] != busy[0].CreatedAt {
		t.Errorf("q/a-busy: waiting_since %q, want its oldest message's %q", since["q/a-busy"], busy[0].CreatedAt)
	}

	// A plain listing keeps alias order.
	var all []string
	for _, l := range f.list(ListOptions{}) {
		all = append(all, l.Alias)
	}
	if !slices.IsSorted(all) {
		t.Errorf("ls without --runnable: %v, want alias order", all)
	}
}

// TestLsListsPastABadThread: a thread.yaml that is a named pipe or a link
// (and a not_mine.yaml that is a pipe) neither hangs ls nor hides the
// other threads: they are listed, the bad ones carry their error and are
// never runnable, and the listing's error (78) comes after.
func TestLsListsPastABadThread(t *testing.T) {
	f := newLsFixture(t, "")
	for _, a := range []string{"ls/a", "ls/pipe", "ls/link"} {
		f.thread(a, envelope.StatePending)
	}
	pipe := filepath.Join(setup.ThreadDir(f.s.JobDir, "ls/pipe"), "thread.yaml")
	link := filepath.Join(setup.ThreadDir(f.s.JobDir, "ls/link"), "thread.yaml")
	for _, p := range []string{pipe, link} {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(pipe, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(t.TempDir(), "elsewhere.yaml"), link); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(f.s.JobDir, "not_mine.yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, runnable := range []bool{false, true} {
		r := &Runner{Setup: f.s, Client: f.client(), Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))}
		type result struct {
			out []Listing
			err error
		}
		done := make(chan result, 1)
		go func() {
			out, err := r.List(context.Background(), ListOptions{Runnable: runnable})
			done <- result{out, err}
		}()
		var res result
		select {
		case res = <-done:
		case <-time.After(20 * time.Second):
			t.Fatal("ls blocked on a named pipe")
		}
		var ee *exit.Error
		if !errors.As(res.err, &ee) || ee.Exit != exit.Config || !errors.Is(res.err, ErrThreadsUnreadable) {
			t.Fatalf("error %v, want 78 after listing", res.err)
		}
		got := map[string]string{}
		for _, l := range res.out {
			got[l.Alias] = l.Error
		}
		if _, ok := got["ls/a"]; !ok {
			t.Errorf("runnable %v: ls/a not listed: %v", runnable, got)
		}
		for alias, what := range map[string]string{"ls/pipe": "a named pipe", "ls/link": "a symbolic link"} {
			msg, listed := got[alias]
			switch {
			case runnable && listed:
				t.Errorf("--runnable printed %s", alias)
			case !runnable && (!listed || !strings.Contains(msg, what)):
				t.Errorf("%s listed %v with error %q, want one naming %s", alias, listed, msg, what)
			}
		}
	}
}

// TestGarbledEnvelopeOfAThreadWeHold: one download of an active thread
// this state tree holds whose value is a string used to be cached in
// not_mine.yaml for a day, and ls stopped listing the thread. Now it is a
// fault of the wire, in a run (75) and in ls (listed with its error, the
// others too, then 75), never cached; once BlobHub answers right again the
// thread is listed and runs. A cache entry left by an earlier version is
// not trusted either.
func TestGarbledEnvelopeOfAThreadWeHold(t *testing.T) {
	h := newHarness(t, false)
	const alias = "wire/garbled"
	activeWithFiles(t, h, alias)
	h.handOff("wire/other", "approval", "")
	o, _ := h.srv.Get(alias)
	good := string(o.Value)
	h.putRaw(alias, `"a string, not an envelope"`)

	sum := h.run(alias)
	wantCode(t, sum, exit.TempFail, exit.CodeUnavailable)
	s := h.setup()
	r := &Runner{Setup: s, Client: h.client(), Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))}
	out, err := r.List(context.Background(), ListOptions{})
	var ee *exit.Error
	if !errors.As(err, &ee) || ee.Exit != exit.TempFail || !errors.Is(err, ErrThreadsUnreadable) {
		t.Fatalf("ls error %v, want 75 after listing", err)
	}
	got := map[string]Listing{}
	for _, l := range out {
		got[l.Alias] = l
	}
	if l := got[alias]; l.State != StateUnknown || !strings.Contains(l.Error, "not a JSON object") {
		t.Errorf("the garbled thread is listed as %+v", l)
	}
	if _, ok := got["wire/other"]; !ok {
		t.Errorf("the other thread is not listed: %v", got)
	}
	if _, cached := setup.LoadNotMine(s.JobDir).Aliases[alias]; cached {
		t.Fatal("a thread this state tree holds was cached in not_mine.yaml")
	}

	h.srv.Put(alias, good)
	// An entry an earlier version left is not trusted.
	if err := setup.AddNotMine(context.Background(), s.JobDir, alias, "not a JSON object"); err != nil {
		t.Fatal(err)
	}
	out, err = r.List(context.Background(), ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, l := range out {
		listed = listed || l.Alias == alias && l.State == envelope.StateActive
	}
	if !listed {
		t.Fatalf("the thread is not listed active once BlobHub answers right: %+v", out)
	}
	h.srv.PersonPost(alias, "still there?")
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "yes"}}}})
	want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
}

// TestSectionLogShownJSON: section.log is JSON a person may tail, so a
// record quoting what came from outside (here the state filter of a
// listing) holds DEL, C1 and the bidirectional controls as \u escapes,
// the same JSON value.
func TestSectionLogShownJSON(t *testing.T) {
	f := newLsFixture(t, "")
	f.thread("t/a", "pending")
	const hostile = "pending\u009b31m\u202etxt.exe\u2066\x7f"
	f.list(ListOptions{States: []string{hostile}})
	b, err := os.ReadFile(filepath.Join(f.s.JobDir, "logs", "section.log"))
	if err != nil {
		t.Fatal(err)
	}
	raw := func(r rune) bool { return r == 0x7f || (r >= 0x80 && r < 0xa0) || redact.BidiControl(r) }
	if bytes.ContainsFunc(b, raw) {
		t.Fatalf("section.log holds raw controls: %q", b)
	}
	var rec struct {
		States []string `json:"states"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(b), &rec); err != nil || len(rec.States) != 1 || rec.States[0] != hostile {
		t.Fatalf("section.log record %q: %v, states %q", b, err, rec.States)
	}
}
