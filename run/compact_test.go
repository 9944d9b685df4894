package run

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/policy"
	"github.com/blobhub/bhw-run/setup"
	"github.com/blobhub/bhw-run/statefile"
)

// journalPath is alias's emissions.jsonl.
func (h *harness) journalPath(alias string) string {
	return filepath.Join(setup.ThreadDir(h.setup().JobDir, alias), "emissions.jsonl")
}

// journalRecords counts the records of alias's journal file.
func (h *harness) journalRecords(alias string) int {
	h.t.Helper()
	b, err := os.ReadFile(h.journalPath(alias))
	if err != nil {
		h.t.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}

// idsOnce fails unless every emission_id on the threads is posted once
// across all of them: an id used twice, even on two threads or by two
// different items, would let the search for an ambiguous post find the
// wrong item.
func (h *harness) idsOnce(aliases ...string) {
	h.t.Helper()
	seen := map[string]string{}
	for _, alias := range aliases {
		for id, n := range h.emissionCounts(alias) {
			if prev, dup := seen[id]; dup || n != 1 {
				h.t.Errorf("emission id %s posted %d times on %s (also on %q)", id, n, alias, prev)
			}
			seen[id] = alias
		}
	}
}

// stat is path's file info, failing the test when there is none.
func (h *harness) stat(path string) os.FileInfo {
	h.t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

// rewritten reports whether path is no longer the file before describes:
// another inode (replaced) or another modification time (written).
func (h *harness) rewritten(path string, before os.FileInfo) bool {
	h.t.Helper()
	st := h.stat(path)
	return !os.SameFile(before, st) || st.ModTime() != before.ModTime()
}

// talk has a person post and the test agent answer with one text: one
// completed turn.
func (h *harness) talk(alias string, n int) {
	h.t.Helper()
	h.srv.PersonPost(alias, fmt.Sprintf("message %d", n))
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: fmt.Sprintf("answer %d", n)}}}})
	want(h.t, h.run(alias), OutcomeTurnCompleted, exit.OK)
}

// TestIdleRunLeavesThreadYAML: an idle run writes no thread.yaml (it
// compares what it would write with the file's own bytes), and a
// thread.yaml that is not bhw-run's encoding byte for byte (edited by
// hand, here a comment) is rewritten once, by the next run, and left alone
// by the runs after it.
func TestIdleRunLeavesThreadYAML(t *testing.T) {
	h := newHarness(t, false)
	const alias = "idle/yaml"
	h.firstTurn(alias, "start", oneTurn())
	path := filepath.Join(setup.ThreadDir(h.setup().JobDir, alias), "thread.yaml")
	before := h.stat(path)
	want(t, h.run(alias), OutcomeIdle, exit.OK)
	if h.rewritten(path, before) {
		t.Fatal("the idle run rewrote thread.yaml")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append([]byte("# edited by hand\n"), b...), 0o600); err != nil {
		t.Fatal(err)
	}
	want(t, h.run(alias), OutcomeIdle, exit.OK)
	if got, err := os.ReadFile(path); err != nil || string(got) != string(b) {
		t.Fatalf("the run after the edit left thread.yaml as\n%s\nwant bhw-run's encoding\n%s", got, b)
	}
	before = h.stat(path)
	want(t, h.run(alias), OutcomeIdle, exit.OK)
	if h.rewritten(path, before) {
		t.Fatal("the idle run after the rewrite rewrote thread.yaml again")
	}
}

// TestJournalCompactedAfterEachRun: a run that leaves nothing open ends
// with the journal cut down to the record of its highest counter, an idle
// run reads it without rewriting it, and the next turn's emission ids go
// on from that counter. Before compaction the journal grew by every item of
// every turn, and every run read all of it.
func TestJournalCompactedAfterEachRun(t *testing.T) {
	h := newHarness(t, false)
	const alias = "compact/t"
	h.firstTurn(alias, "start", oneTurn())
	if n := h.journalRecords(alias); n != 2 {
		t.Fatalf("the journal holds %d records after a completed turn, want 2 (the counter)", n)
	}
	st := h.stat(h.journalPath(alias))
	h.srv.ResetCounts()
	want(t, h.run(alias), OutcomeIdle, exit.OK)
	if n, cmds := h.srv.Requests(); n != 2 {
		t.Fatalf("the idle run made %d requests %v, want 2", n, cmds)
	}
	if h.rewritten(h.journalPath(alias), st) {
		t.Fatal("the idle run rewrote the compacted journal")
	}
	for i := range 3 {
		h.talk(alias, i)
		if n := h.journalRecords(alias); n != 2 {
			t.Fatalf("turn %d: the journal holds %d records, want 2", i, n)
		}
	}
	h.noneTwice(alias)
	h.idsOnce(alias)
	// The counters of the ids posted grow with every item: none restarts.
	th := h.thread(alias)
	var last int64
	for _, it := range h.srv.Items(alias) {
		var m struct {
			EmissionID string `json:"emission_id"`
		}
		_ = json.Unmarshal(it.Metadata, &m)
		if m.EmissionID == "" {
			continue
		}
		n, ok := counterOf(m.EmissionID, th.EmissionNonce)
		if !ok || n <= last {
			t.Fatalf("emission %s after counter %d", m.EmissionID, last)
		}
		last = n
	}
}

// TestJournalCompactedOnceItHasGrown: with the threshold bhw-run ships, a
// turn's few records stay in the journal (no rewrite, no new file), and the
// run that finds the journal grown past compactAtBytes cuts it down to the
// counter; the ids go on from it either way.
func TestJournalCompactedOnceItHasGrown(t *testing.T) {
	defer func(v int64) { compactAtBytes = v }(compactAtBytes)
	compactAtBytes = compactThreshold
	h := newHarness(t, false)
	const alias = "grown/t"
	h.firstTurn(alias, "start", oneTurn())
	first, err := os.Stat(h.journalPath(alias))
	if err != nil {
		t.Fatal(err)
	}
	if n := h.journalRecords(alias); n <= 2 {
		t.Fatalf("the journal holds %d records after one small turn: compacted under the threshold", n)
	}
	turns := 0
	for ; turns < 200; turns++ {
		st, err := os.Stat(h.journalPath(alias))
		if err != nil {
			t.Fatal(err)
		}
		if !os.SameFile(first, st) {
			break // rewritten
		}
		if st.Size() > compactAtBytes+4<<10 {
			t.Fatalf("the journal grew to %d bytes (threshold %d) without a compaction", st.Size(), compactAtBytes)
		}
		h.talk(alias, turns)
	}
	if turns == 0 || turns == 200 {
		t.Fatalf("compacted after %d turns", turns)
	}
	if n := h.journalRecords(alias); n != 2 {
		t.Errorf("the journal holds %d records after its compaction, want 2 (the counter)", n)
	}
	h.talk(alias, turns)
	h.noneTwice(alias)
	h.idsOnce(alias)
	t.Logf("compacted after %d more turns", turns)
}

// TestCompactedManyTimesReconciles: a thread whose journal has been
// compacted after each of many turns still posts an ambiguous item
// exactly once — found by its emission_id when the server stored it, posted
// again when it did not, left journaled for the next run when BlobHub is
// gone — on the job thread and on worker. An emission id used again after a
// compaction would be "found" among the thread's earlier items, and the new
// item lost.
func TestCompactedManyTimesReconciles(t *testing.T) {
	h := newHarness(t, false)
	const alias = "compactmany/t"
	h.firstTurn(alias, "start", oneTurn())
	turn := 0
	turns := func(n int) {
		for range n {
			h.talk(alias, turn)
			turn++
			if r := h.journalRecords(alias); r != 2 {
				t.Fatalf("turn %d: the journal holds %d records, want 2", turn, r)
			}
		}
	}
	failThread := func(dropBefore bool) {
		t.Helper()
		work := h.work
		if err := os.Rename(work, work+".away"); err != nil {
			t.Fatal(err)
		}
		h.srv.PersonPost(alias, "after the checkout moved")
		if dropBefore {
			// thread_failed's post never reaches the server: the search
			// on worker must not find it, and it is posted again.
			h.srv.DropBefore("post_session_thread_item", 1)
		}
		wantCode(t, h.run(alias), exit.Failed, exit.CodeWorkFolderNotFound)
		if err := os.Rename(work+".away", work); err != nil {
			t.Fatal(err)
		}
		h.setWireState(alias, envelope.StatePending) // thread retry
		h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "retried"}}}})
		want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
	}

	turns(12)
	failThread(false)
	turns(12)
	// Stored, then the connection dropped: found by its id.
	h.srv.DropAfterStore(1)
	h.talk(alias, turn)
	turn++
	turns(6)
	// Cut before the server and again after the search: journaled, the
	// run ends 75, no compaction; the next run reconciles, then compacts.
	h.srv.PersonPost(alias, "while BlobHub goes away")
	h.play(oneTurn())
	h.srv.DropBefore("post_session_thread_item", 2)
	wantCode(t, h.run(alias), exit.TempFail, exit.CodeUnposted)
	if n := h.journalOpen(alias); n == 0 {
		t.Fatal("nothing left journaled by the run BlobHub dropped")
	}
	want(t, h.run(alias), OutcomeIdle, exit.OK)
	if n := h.journalOpen(alias); n != 0 || h.journalRecords(alias) != 2 {
		t.Fatalf("after the reconciling run: %d open, %d records", n, h.journalRecords(alias))
	}
	turns(6)
	failThread(true)

	h.noneTwice(alias, "worker")
	h.idsOnce(alias, "worker")
	failed := 0
	for _, it := range h.srv.Items("worker") {
		if strings.Contains(string(it.Metadata), agent.ItemThreadFailed) {
			failed++
		}
	}
	if failed != 2 {
		t.Fatalf("%d thread_failed items on worker, want 2", failed)
	}
	items := h.items(alias)
	if got, want := count(items, "person"), turn+4; got != want {
		t.Fatalf("%d person items, want %d", got, want)
	}
	if got, want := count(items, "turn_end"), turn+4; got != want {
		t.Fatalf("%d turn_end items, want %d (one per turn)", got, want)
	}
}

// TestCompactedPromptRestored: the compacted journal of a parked thread
// keeps the prompt's posted record, so a thread.yaml that lost the
// prompt's item id (a kill between the confirmation and the save) takes it
// from there instead of posting the prompt again.
func TestCompactedPromptRestored(t *testing.T) {
	h := newHarness(t, false)
	const alias = "compactprompt/t"
	write := h.handOffWrite(alias, "write x", agenttest.Step{Text: "let me write"})
	want(t, h.run(alias), OutcomeParked, exit.OK)
	if n := h.journalRecords(alias); n > 3 {
		t.Fatalf("the parked thread's journal holds %d records, want the counter and the prompt's", n)
	}
	th := h.thread(alias)
	itemID := th.Prompt.ItemID
	th.Prompt.ItemID, th.Prompt.CreatedAt = "", ""
	writeThread(t, h, alias, th)
	want(t, h.run(alias), OutcomeParked, exit.OK)
	if got := h.thread(alias).Prompt.ItemID; got != itemID {
		t.Fatalf("prompt item id %q after the run, want %q from the journal", got, itemID)
	}
	if c := count(h.items(alias), "pending_prompt"); c != 1 {
		t.Fatalf("%d pending_prompt items", c)
	}
	h.srv.PersonPost(alias, "yes")
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Call: write}, {Text: "written"}}}})
	want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
	if got := h.items(alias); count(got, "pending_prompt_resolved") != 1 {
		t.Fatalf("items %v", got)
	}
	h.noneTwice(alias)
	h.idsOnce(alias)
}

func writeCall(h *harness) *agenttest.Tool {
	return &agenttest.Tool{Effect: policy.EffectWrite, Target: policy.Target{Paths: []string{filepath.Join(h.work, "x.txt")}}, Result: "File created"}
}

// handOffWrite hands alias off with message and scripts a turn of steps
// then a writeCall, which the approval policy holds for a person; it
// returns the call, for the script of the turn the answer resumes.
func (h *harness) handOffWrite(alias, message string, steps ...agenttest.Step) *agenttest.Tool {
	h.t.Helper()
	write := writeCall(h)
	h.handOff(alias, "approval", message)
	h.play(agenttest.Turn(append(steps, agenttest.Step{Call: write})...))
	return write
}

func writeThread(t *testing.T, h *harness, alias string, th *envelope.Thread) {
	t.Helper()
	b, err := yaml.Marshal(th)
	if err != nil {
		t.Fatal(err)
	}
	if err := statefile.WriteAtomic(filepath.Join(setup.ThreadDir(h.setup().JobDir, alias), "thread.yaml"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestCompactKeepsWhatReadersNeed: a journal compacted for the open
// prompt reads back with the same counter, the prompt's posted record and
// the prompt's resolution closed as it was, so the prompt is not resolved
// twice; a resolution of a prompt no longer open is not kept. A temp file
// left by a compaction a kill interrupted is removed, and the file as an
// earlier bhw-run reads it (no compaction, no kind) yields the same counter.
func TestCompactKeepsWhatReadersNeed(t *testing.T) {
	for _, closed := range []string{"posted", "dropped"} {
		t.Run(closed, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "emissions.jsonl")
			stray := filepath.Join(dir, ".emissions.jsonl.tmp-123")
			if err := os.WriteFile(stray, []byte("{half"), 0o600); err != nil {
				t.Fatal(err)
			}
			j, err := openJournal(path, "n0")
			if err != nil {
				t.Fatal(err)
			}
			for i := range 50 {
				e, err := j.add("a", agent.Item{Brief: "x", Meta: map[string]any{"type": "text"}}, "")
				if err != nil {
					t.Fatal(err)
				}
				if i%7 == 3 {
					_ = j.drop(e.ID)
				} else {
					_ = j.confirm(e.ID, fmt.Sprintf("itm_%d", i), "2026-01-01T00:00:00.000000+00:00")
				}
			}
			prompt, _ := j.add("a", agent.Item{Brief: "?", Meta: map[string]any{"type": agent.ItemPendingPrompt}}, "")
			_ = j.confirm(prompt.ID, "itm_prompt", "2026-01-02T00:00:00.000000+00:00")
			old, _ := j.resolution("a", "itm_old", agent.Item{Brief: "old", Meta: map[string]any{"type": agent.ItemPendingPromptResolved, "prompt_item_id": "itm_old"}})
			_ = j.confirm(old.ID, "itm_old_res", "2026-01-02T00:00:00.000000+00:00")
			res, _ := j.resolution("a", "itm_prompt", agent.Item{Brief: "ok", Meta: map[string]any{"type": agent.ItemPendingPromptResolved, "prompt_item_id": "itm_prompt"}})
			if closed == "posted" {
				_ = j.confirm(res.ID, "itm_res", "2026-01-03T00:00:00.000000+00:00")
			} else {
				_ = j.drop(res.ID)
			}
			_ = j.nextID() // reserved, never journaled: still never reused
			counter := j.counter
			rewrote, err := j.compact(prompt.ID, "itm_prompt")
			if err != nil || !rewrote {
				t.Fatalf("compact: %v %v", rewrote, err)
			}
			if _, err := os.Stat(stray); !os.IsNotExist(err) {
				t.Fatal("the stray temp file of an interrupted compaction is still there")
			}
			// The journal stays usable: an append lands in the new file.
			if _, err := j.add("a", agent.Item{Brief: "after", Meta: map[string]any{"type": "text"}}, ""); err != nil {
				t.Fatal(err)
			}
			_ = j.closeFile()

			back, err := openJournal(path, "n0")
			if err != nil {
				t.Fatal(err)
			}
			defer back.closeFile()
			if back.counter != counter+1 {
				t.Fatalf("counter %d after compaction, want %d", back.counter, counter+1)
			}
			if info := back.posted[prompt.ID]; info.ItemID != "itm_prompt" {
				t.Fatalf("the prompt's posted record: %+v", info)
			}
			if e, err := back.resolution("a", "itm_prompt", agent.Item{Meta: map[string]any{"type": agent.ItemPendingPromptResolved, "prompt_item_id": "itm_prompt"}}); err != nil || e != nil {
				t.Fatalf("the prompt was resolved again: %+v %v", e, err)
			}
			if got := len(back.pending()); got != 1 {
				t.Fatalf("%d open after compaction, want the one added after it", got)
			}
			if _, kept := back.resolutions["itm_old"]; kept {
				t.Fatal("the resolution of a prompt no longer open was kept")
			}
			if closed == "dropped" && !back.dropped[res.ID] {
				t.Fatal("the dropped resolution came back as posted")
			}
			// An earlier bhw-run's reader: every line an emission, posted or
			// dropped record, the counter the highest id seen.
			b, _ := os.ReadFile(path)
			var top int64
			for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
				var rec struct {
					Emission *struct {
						ID string `json:"emission_id"`
					} `json:"emission"`
					Posted, Dropped string
				}
				if err := json.Unmarshal(line, &rec); err != nil || rec.Emission == nil && rec.Posted == "" && rec.Dropped == "" {
					t.Fatalf("a line an earlier reader does not know: %s", line)
				}
				if rec.Emission != nil {
					if n, ok := counterOf(rec.Emission.ID, "n0"); ok {
						top = max(top, n)
					}
				}
			}
			if top != counter+1 {
				t.Fatalf("an earlier reader finds counter %d, want %d", top, counter+1)
			}
		})
	}
}

// TestCompactionKeepsJournalOpenEmissions: nothing is compacted while an
// emission is open.
func TestCompactionKeepsJournalOpenEmissions(t *testing.T) {
	j, err := openJournal(filepath.Join(t.TempDir(), "emissions.jsonl"), "n0")
	if err != nil {
		t.Fatal(err)
	}
	defer j.closeFile()
	a, _ := j.add("a", agent.Item{Meta: map[string]any{"type": "text"}}, "")
	_ = j.confirm(a.ID, "itm_a", "")
	open, _ := j.add("a", agent.Item{Meta: map[string]any{"type": "text"}}, "")
	if rewrote, err := j.compact("", ""); err != nil || rewrote {
		t.Fatalf("compacted with %s open: %v %v", open.ID, rewrote, err)
	}
	if ids := []string{j.pending()[0].ID}; !slices.Equal(ids, []string{open.ID}) {
		t.Fatalf("pending %v", ids)
	}
}

// TestGrantsEndWithTheTurn: a grant the resumed turn never used (it timed
// out first) is gone when that turn ends: it cannot approve a later turn's
// call, and grants do not pile up in thread.yaml.
func TestGrantsEndWithTheTurn(t *testing.T) {
	h := newHarness(t, false)
	const alias = "grants/t"
	h.handOffWrite(alias, "write x")
	want(t, h.run(alias), OutcomeParked, exit.OK)
	h.srv.PersonPost(alias, "yes")
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{WaitInterrupt: true}}}})
	h.tune = func(r *Runner) { r.MaxDuration = 300 * time.Millisecond }
	wantCode(t, h.run(alias), exit.TurnFailed, exit.CodeTurnTimeout)
	if g := h.thread(alias).Grants; len(g) != 0 {
		t.Fatalf("grants %v after the turn ended", g)
	}
}
