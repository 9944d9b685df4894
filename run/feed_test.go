package run

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/setup"
)

// The change feed's pass (feed.go): never a miss, one request when
// nothing changed.

// runnable is one `ls --runnable` pass: the aliases it printed.
func (f *lsFixture) runnable() []string {
	f.t.Helper()
	var printed []string
	f.list(ListOptions{Runnable: true, Emit: func(out []Listing) error {
		for _, l := range out {
			printed = append(printed, l.Alias)
		}
		return nil
	}})
	return printed
}

// feedState is section.yaml's events block.
func (f *lsFixture) feedState() setup.SectionEvents {
	f.t.Helper()
	st, err := loadFeed(f.s.JobDir)
	if err != nil {
		f.t.Fatal(err)
	}
	return st
}

// lastRecord is the last ls record of section.log.
func (f *lsFixture) lastRecord() map[string]any {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.s.JobDir, "logs", "section.log"))
	if err != nil {
		f.t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rec); err != nil {
		f.t.Fatal(err)
	}
	return rec
}

// activeFleet is n active, idle threads, known here, and a first pass
// (the full listing that sets the cursor).
func activeFleet(t *testing.T, n int) *lsFixture {
	f := newLsFixture(t, "")
	for i := range n {
		alias := fmt.Sprintf("fleet/t%03d", i)
		f.thread(alias, "active")
		f.local(alias, "active", nil)
	}
	if got := f.runnable(); len(got) != 0 {
		t.Fatalf("an idle fleet lists %v", got)
	}
	if st := f.feedState(); st.LastProcessedAt == "" {
		t.Fatal("the first pass set no cursor")
	}
	return f
}

func wantListed(t *testing.T, what string, got []string, aliases ...string) {
	t.Helper()
	slices.Sort(got)
	slices.Sort(aliases)
	if !slices.Equal(got, aliases) {
		t.Errorf("%s: listed %q, want %q", what, got, aliases)
	}
}

// TestFeedPassCost: once the cursor is set, a pass over 60 idle threads is
// one request, and a pass after a message to one of them at most five (the
// feed, the envelope, the items: a page and the empty one after it),
// whatever the number of threads.
func TestFeedPassCost(t *testing.T) {
	f := activeFleet(t, 60)
	f.srv.ResetCounts()
	wantListed(t, "idle pass", f.runnable())
	if n, cmds := f.srv.Requests(); n != 1 || cmds[0] != blobhub.CmdListEvents {
		t.Errorf("idle pass: %d requests %v, want one list_session_events", n, cmds)
	}
	// Ten seconds on the server's clock after the burst of 60 uploads,
	// everything up to the cursor has settled: a pass reads none of it
	// again, and keeps no key of it.
	f.srv.ClockOffset(feedOverlap + time.Second)
	wantListed(t, "settled", f.runnable())
	if st := f.feedState(); len(st.Seen) != 0 || st.ReadAt == "" {
		t.Errorf("after the overlap: events.seen %q, read_at %q; want no key kept and the read's time", st.Seen, st.ReadAt)
	}
	f.srv.PersonPost("fleet/t007", "one more thing")
	f.srv.ResetCounts()
	wantListed(t, "after a message", f.runnable(), "fleet/t007")
	if n, cmds := f.srv.Requests(); n > 5 {
		t.Errorf("a pass after one message: %d requests %v, want at most 5", n, cmds)
	}
	// Still runnable (nothing ran it): judged again from events.due.
	f.srv.ResetCounts()
	wantListed(t, "again", f.runnable(), "fleet/t007")
	if n, _ := f.srv.Requests(); n > 5 {
		t.Errorf("the due thread judged again: %d requests, want at most 5", n)
	}
}

// TestFeedChangeDuringPass: a message posted after a pass read the feed,
// before it moved the cursor, is listed by the next pass.
func TestFeedChangeDuringPass(t *testing.T) {
	f := activeFleet(t, 3)
	f.srv.PersonPost("fleet/t000", "first")
	testHookFeedRead = func() {
		testHookFeedRead = nil
		f.srv.PersonPost("fleet/t001", "during the pass")
	}
	t.Cleanup(func() { testHookFeedRead = nil })
	wantListed(t, "the pass", f.runnable(), "fleet/t000")
	wantListed(t, "the next pass", f.runnable(), "fleet/t000", "fleet/t001")
}

// TestFeedSameInstant: a change stamped with the very created_at the
// cursor holds (created_since is strict) is listed.
func TestFeedSameInstant(t *testing.T) {
	f := activeFleet(t, 3)
	f.srv.EqualTimestamps(true)
	f.srv.PersonPost("fleet/t000", "first")
	wantListed(t, "first", f.runnable(), "fleet/t000")
	cursor := f.feedState().LastProcessedAt
	f.srv.PersonPost("fleet/t002", "same instant")
	if ev := f.srv.Events(); ev[len(ev)-1].CreatedAt != cursor {
		t.Fatalf("the second message's event is stamped %s, not the cursor's %s", ev[len(ev)-1].CreatedAt, cursor)
	}
	wantListed(t, "second", f.runnable(), "fleet/t000", "fleet/t002")
}

// TestFeedHostClock: the server's clock an hour ahead of the host's, or
// behind: the cursor is the server's stamp, and no change is missed.
func TestFeedHostClock(t *testing.T) {
	for _, off := range []time.Duration{time.Hour, -time.Hour} {
		t.Run(off.String(), func(t *testing.T) {
			f := newLsFixture(t, "")
			f.srv.ClockOffset(off)
			f.thread("c/a", "active")
			f.local("c/a", "active", nil)
			wantListed(t, "first", f.runnable())
			f.handOff("c/p1", "autonomous", "hello")
			wantListed(t, "hand-off", f.runnable(), "c/p1")
			ev := f.srv.Events()
			if got := f.feedState().LastProcessedAt; got != ev[len(ev)-1].CreatedAt {
				t.Errorf("cursor %s, want the server's stamp of the last event %s", got, ev[len(ev)-1].CreatedAt)
			}
			f.srv.PersonPost("c/a", "news")
			wantListed(t, "message", f.runnable(), "c/p1", "c/a")
		})
	}
}

// TestFeedPageLimit: more changes than the pages one pass reads: a full
// listing, which lists them all.
func TestFeedPageLimit(t *testing.T) {
	f := activeFleet(t, 2)
	old := maxFeedPages
	maxFeedPages = 2
	t.Cleanup(func() { maxFeedPages = old })
	f.srv.EventsPageCap(3)
	var aliases []string
	for i := range 5 { // ten events: two a hand-off
		a := fmt.Sprintf("p/t%d", i)
		f.handOff(a, "autonomous", "go")
		aliases = append(aliases, a)
	}
	wantListed(t, "the backlog", f.runnable(), aliases...)
	if rec := f.lastRecord(); rec["full"] != true {
		t.Errorf("the pass was not a full listing: %v", rec)
	}
	f.srv.ResetCounts()
	wantListed(t, "after", f.runnable(), aliases...)
	if n := f.srv.Count(blobhub.CmdList); n != 0 {
		t.Errorf("the pass after listed every object again (%d list requests)", n)
	}
}

// TestFeedTwoPasses: a pass that runs whole while another has read the
// feed and not yet moved the cursor: the later write keeps what both
// found.
func TestFeedTwoPasses(t *testing.T) {
	f := activeFleet(t, 2)
	f.srv.PersonPost("fleet/t000", "a")
	var inner []string
	testHookFeedRead = func() {
		testHookFeedRead = nil
		f.handOff("q/x", "autonomous", "go")
		inner = f.runnable()
	}
	t.Cleanup(func() { testHookFeedRead = nil })
	wantListed(t, "outer pass", f.runnable(), "fleet/t000")
	wantListed(t, "inner pass", inner, "fleet/t000", "q/x")
	wantListed(t, "next pass", f.runnable(), "fleet/t000", "q/x")
	st := f.feedState()
	if len(st.Seen) != len(slices.Compact(slices.Sorted(slices.Values(st.Seen)))) {
		t.Errorf("events.seen holds a key twice: %q", st.Seen)
	}
}

// TestFeedLocalDue: what only this state tree knows is listed without a
// change on the wire: a turn left running (found by the safety net's full
// listing), and a provider's limit that has ended.
func TestFeedLocalDue(t *testing.T) {
	f := activeFleet(t, 2)
	// A run killed mid-turn with no event after it: the feed says nothing.
	f.local("fleet/t000", "active", func(th *envelope.Thread) { th.Turn.State = envelope.TurnStateRunning })
	wantListed(t, "no event", f.runnable())
	editFeed(t, f, func(st *setup.SectionEvents) {
		st.FullListingAt = blobhub.FormatTime(time.Now().Add(-2 * setup.DefaultFullListingEvery))
	})
	wantListed(t, "safety net", f.runnable(), "fleet/t000")

	// Held by a provider's limit: judged, not runnable, due at its end.
	until := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	f.local("fleet/t001", "active", func(th *envelope.Thread) { th.Ledger = &envelope.Ledger{LimitedUntil: until} })
	f.srv.PersonPost("fleet/t001", "please")
	wantListed(t, "held", f.runnable(), "fleet/t000")
	if got := f.feedState().Due["fleet/t001"]; got == "" {
		t.Fatalf("events.due of the held thread %q, want its limit's end", got)
	}
	// An hour later (both clocks moved back by hand): runnable, no event.
	past := time.Now().Add(-time.Minute)
	f.local("fleet/t001", "active", func(th *envelope.Thread) {
		th.Ledger = &envelope.Ledger{LimitedUntil: past.UTC().Format(time.RFC3339)}
		th.Items.PendingInbound = []envelope.InboundItem{{ID: "itm_x", CreatedAt: blobhub.FormatTime(past), UserID: bhtest.PersonUserID, Content: []envelope.ContentBlock{{Type: "text", Text: "please"}}}}
	})
	editFeed(t, f, func(st *setup.SectionEvents) { st.Due["fleet/t001"] = blobhub.FormatTime(past) })
	wantListed(t, "limit ended", f.runnable(), "fleet/t000", "fleet/t001")
}

// setPoll sets discovery.poll_interval as config.yaml would.
func setPoll(t *testing.T, f *lsFixture, v string) {
	t.Helper()
	f.s.Config.Discovery.PollInterval = v
	if err := f.s.Config.Discovery.Validate(); err != nil {
		t.Fatal(err)
	}
}

func editFeed(t *testing.T, f *lsFixture, edit func(*setup.SectionEvents)) {
	t.Helper()
	if _, err := setup.UpdateSection(context.Background(), f.s.JobDir, f.s.Section, func(st *setup.SectionState) { edit(&st.Events) }); err != nil {
		t.Fatal(err)
	}
}

// TestFeedWait: --wait returns as soon as a pass finds a runnable thread,
// prints nothing when its bound passes, and ends at once when cancelled.
func TestFeedWait(t *testing.T) {
	f := activeFleet(t, 2)
	setPoll(t, f, "10ms")
	r := &Runner{Setup: f.s, Client: f.client(), Logger: slog.New(slog.NewTextHandler(testWriter{f.t}, nil))}
	passes := 0
	testHookFeedRead = func() {
		if passes++; passes == 3 {
			f.srv.PersonPost("fleet/t001", "wake up")
		}
	}
	t.Cleanup(func() { testHookFeedRead = nil })
	var printed []Listing
	out, err := r.WaitRunnable(context.Background(), ListOptions{Emit: func(l []Listing) error { printed = l; return nil }}, time.Hour)
	if err != nil || len(out) != 1 || out[0].Alias != "fleet/t001" || len(printed) != 1 {
		t.Fatalf("WaitRunnable = %v, %v (printed %v); want fleet/t001", out, err, printed)
	}
	testHookFeedRead = nil
	f.local("fleet/t001", "active", nil)
	editFeed(t, f, func(st *setup.SectionEvents) { st.Due = nil })
	printed = nil
	out, err = r.WaitRunnable(context.Background(), ListOptions{Emit: func(l []Listing) error { printed = l; return nil }}, 30*time.Millisecond)
	if err != nil || len(out) != 0 || printed != nil {
		t.Errorf("past its bound: %v, %v, printed %v; want nothing", out, err, printed)
	}
	ctx, cancel := context.WithCancel(context.Background())
	testHookFeedRead = cancel
	setPoll(t, f, "1h")
	done := make(chan error, 1)
	go func() { _, err := r.WaitRunnable(ctx, ListOptions{}, 0); done <- err }()
	select {
	case err := <-done:
		if err != context.Canceled {
			t.Errorf("cancelled: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("--wait did not end a minute after its context was cancelled")
	}
}

// feedKillEnv selects maybeRunFeedPass in a re-executed test binary.
const feedKillEnv = "BHW_TEST_FEED_KILL"

type feedKillSpec struct {
	State, Config, Store, Stage string
}

func init() { maybeRunFeedPass() }

// maybeRunFeedPass runs one `ls --runnable` pass on a file:// store,
// printing each alias as ls does, and SIGKILLs itself at Stage of the
// cursor's move.
func maybeRunFeedPass() {
	s, ok := subprocessSpec[feedKillSpec](feedKillEnv)
	if !ok {
		return
	}
	testHookFeedCommit = func(stage string) {
		if stage == s.Stage {
			killSelf()
		}
	}
	r := subprocessRunner(s.State, s.Config, s.Store)
	_, err := r.List(context.Background(), ListOptions{Runnable: true, Emit: func(out []Listing) error {
		for _, l := range out {
			fmt.Println(l.Alias) // unbuffered: on the pipe before the cursor moves
		}
		return nil
	}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestFeedKill9: a pass killed just before or just after it moves the
// cursor: the next pass lists every runnable thread, each once, and reads
// again exactly the changes the killed one did not record.
func TestFeedKill9(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, stage := range []string{"before", "after"} {
		t.Run(stage, func(t *testing.T) {
			f := newLsFixture(t, "")
			f.harness.local = true
			f.s = f.setup()
			if err := os.WriteFile(filepath.Join(f.s.StateDir, "identity.yaml"), []byte("user_id: usr_local\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			f.thread("k/a", "active")
			f.local("k/a", "active", nil)
			wantListed(t, "first", f.runnable())
			f.handOff("k/p", "autonomous", "go")
			f.srv.PersonPost("k/a", "news")
			before := f.feedState()

			spec, _ := json.Marshal(feedKillSpec{State: f.state, Config: f.config, Store: f.srv.Dir(), Stage: stage})
			cmd := exec.Command(exe, "-test.run=^$")
			cmd.Env = append(os.Environ(), feedKillEnv+"="+string(spec))
			stdout, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var printed []string
			for sc := bufio.NewScanner(stdout); sc.Scan(); {
				printed = append(printed, sc.Text())
			}
			err := cmd.Wait()
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("the pass was not killed: %v", err)
			}
			wantListed(t, "the killed pass", printed, "k/a", "k/p")

			after := f.feedState()
			moved := after.LastProcessedAt != before.LastProcessedAt
			if moved != (stage == "after") {
				t.Errorf("killed %s the write: cursor %s → %s", stage, before.LastProcessedAt, after.LastProcessedAt)
			}
			wantListed(t, "the next pass", f.runnable(), "k/a", "k/p")
			events := f.lastRecord()["events"]
			if wantEvents := map[string]float64{"before": 3, "after": 0}[stage]; events != wantEvents {
				t.Errorf("the next pass read %v new changes, want %v (three when the cursor had not moved, none after)", events, wantEvents)
			}
			var st setup.SectionState
			b, _ := os.ReadFile(filepath.Join(f.s.JobDir, "section.yaml"))
			if err := yaml.Unmarshal(b, &st); err != nil {
				t.Fatalf("section.yaml: %v", err)
			}
			if len(st.Events.Seen) != len(slices.Compact(slices.Sorted(slices.Values(st.Events.Seen)))) {
				t.Errorf("events.seen holds a key twice: %q", st.Events.Seen)
			}
		})
	}
}

// TestFeedCursorAhead: a cursor a day past the server's clock (a server
// Date that jumped and came back, another writer of section.yaml) is
// invalid: the pass lists the thread posted to at once (a full listing,
// which sets the cursor back to the server's newest stamp), not an hour
// later.
func TestFeedCursorAhead(t *testing.T) {
	f := activeFleet(t, 3)
	ahead := blobhub.FormatTime(time.Now().Add(24 * time.Hour))
	editFeed(t, f, func(st *setup.SectionEvents) { st.LastProcessedAt = ahead })
	f.srv.PersonPost("fleet/t001", "while the cursor is ahead")
	wantListed(t, "the pass", f.runnable(), "fleet/t001")
	if got := f.feedState().LastProcessedAt; got == ahead {
		t.Errorf("the cursor stayed ahead: %s", got)
	}
	if rec := f.lastRecord(); rec["full"] != true {
		t.Errorf("section.log: %v, want a full listing", rec)
	}
	f.srv.PersonPost("fleet/t002", "after")
	wantListed(t, "the next pass", f.runnable(), "fleet/t001", "fleet/t002")
}

// TestFeedReadSince: every read of the feed starts at a created_at the
// server gave (the test hub refuses any other created_since), the ten
// seconds before the cursor read again all the same: events.read_since is
// the newest event at or before them, or the feed's start while there is
// none; a section.yaml without it (the daemon's, an older bhw-run's) gets
// one from a page read back from the cursor.
func TestFeedReadSince(t *testing.T) {
	f := activeFleet(t, 3)
	if got := f.feedState().ReadSince; got != feedStart {
		t.Errorf("after the full listing of a young feed: read_since %q, want %q", got, feedStart)
	}
	f.srv.PersonPost("fleet/t000", "one")
	wantListed(t, "one", f.runnable(), "fleet/t000")
	gave := func(what string) {
		t.Helper()
		st := f.feedState()
		for _, e := range f.srv.Events() {
			if e.CreatedAt == st.ReadSince {
				return
			}
		}
		t.Errorf("%s: read_since %q is not an event's created_at", what, st.ReadSince)
	}
	f.srv.ClockOffset(feedOverlap + time.Second)
	f.srv.PersonPost("fleet/t001", "two")
	wantListed(t, "two", f.runnable(), "fleet/t000", "fleet/t001")
	gave("once the first events are older than the overlap")
	// The daemon keeps last_processed_at alone.
	editFeed(t, f, func(ev *setup.SectionEvents) { ev.ReadSince, ev.ReadAt, ev.Seen = "", "", nil })
	f.srv.PersonPost("fleet/t002", "three")
	wantListed(t, "three", f.runnable(), "fleet/t000", "fleet/t001", "fleet/t002")
	gave("from a section.yaml without read_since")
}
