package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/lock"
	"github.com/blobhub/bhw-run/policy"
	"github.com/blobhub/bhw-run/redact"
	"github.com/blobhub/bhw-run/setup"
	"github.com/blobhub/bhw-run/statefile"
)

// activation is the state of one run of one thread.
type activation struct {
	r     *Runner
	alias string
	dir   string
	log   *slog.Logger
	// report is what the run tells its caller about itself.
	report report

	// rec is thread.yaml and the journal (load, peek; nil before).
	rec   *record
	env   *envelope.Envelope
	self  self       // who the run is on BlobHub
	tlog  *threadLog // logs/thread.log (load; nil before)
	locks heldLocks  // what the run holds of the state tree's locks
	read  threadRead // what reading the thread found beyond thread.yaml
	// poster posts what rec journals and owns what posting learned (load,
	// peek; nil before).
	poster *poster
	// faults is the first state write that failed mid-run (stateFault).
	faults stateFaults
	// agentTurn is the agent's turn as the run drives it: how it starts,
	// when it must end, how it is stopped.
	agentTurn agentTurn
}

// report is what a run tells its caller about itself: the summary it
// returns at its end, the progress the Observer is told meanwhile, and
// whether the thread failed in this run (the summary's outcome is then
// failed, whatever the row returns).
type report struct {
	sum    *Summary
	prog   *progress // nil: no Observer is told
	failed bool
}

// load reads thread.yaml, the journal and identity.yaml.
func (a *activation) load() error {
	a.rec = newRecord(a.dir, a.alias, a.log)
	if err := a.rec.load(a.r.Setup.Secrets); err != nil {
		return err
	}
	a.usePoster()
	// A state tree bhw-run cannot use is the machine's fault (78), never a
	// failed thread (1).
	if err := a.r.Setup.EnsureDir(filepath.Join(a.dir, "logs")); err != nil {
		return err
	}
	var err error
	if a.tlog, err = openThreadLog(a.dir, a.r.Setup.Secrets); err != nil {
		return err
	}
	id, err := setup.LoadIdentity(a.r.Setup.StateDir)
	if err != nil {
		return err
	}
	if id != nil {
		a.self.userID = id.UserID
	}
	return nil
}

// peek is load without a lock or a write (record.peek).
func (a *activation) peek() error {
	if err := a.r.Setup.CheckDir(a.dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	a.rec = newRecord(a.dir, a.alias, a.log)
	a.usePoster()
	return a.rec.peek()
}

func (a *activation) close() {
	if a.locks.slot != nil {
		_ = a.locks.slot.Release()
	}
	if a.rec != nil {
		a.rec.close()
	}
	if a.tlog != nil {
		a.tlog.close()
	}
}

// download reads the envelope: 66 when absent, 65 when not a job.
func (a *activation) download(ctx context.Context) error {
	obj, err := downloadEnvelope(ctx, a.r.Client, a.alias)
	if errors.Is(err, blobhub.ErrTooLarge) {
		return a.tooLargeEnvelope(err)
	}
	if errors.Is(err, blobhub.ErrNotFound) {
		if _, lerr := a.r.Client.List(ctx); errors.Is(lerr, blobhub.ErrNotFound) {
			return exit.Errorf(exit.CodeSessionNotFound, "session %s was not found on BlobHub; check the revision_id and session_id of %s", a.r.Setup.Section.Session.SessionID, a.r.Setup.Where())
		}
		return exit.Errorf(exit.CodeNoThread, "there is no thread %q in %s; check the alias or create it with `bhw-run thread new`", a.alias, a.r.Setup.Where())
	}
	if err != nil {
		return blobhub.AsExit(err, "download "+a.alias)
	}
	env, err := envelope.Parse(obj.Value)
	if err != nil && a.holds() {
		return malformed(a.alias, err)
	}
	if err != nil || !env.IsJob() {
		if err != nil {
			env = nil
		}
		// A thread object is never cached: it may become a job any time;
		// nor is a thread this state tree holds.
		why, cache := notJobReason(env)
		if cache && !a.holds() {
			_ = setup.AddNotMine(ctx, a.r.Setup.JobDir, a.alias, why)
		} else if !cache {
			why = "a thread without an agent block or instance.state"
		}
		return exit.Errorf(exit.CodeNotJob, "%q is not a job thread (%s); hand off a thread with an agent block", a.alias, why)
	}
	a.env = env
	return nil
}

// DownloadJob reads a job thread's envelope for the person's commands and
// explain: 66 when absent, 65 when not a job.
func DownloadJob(ctx context.Context, c blobhub.Client, alias string) (blobhub.Object, *envelope.Envelope, error) {
	obj, err := downloadEnvelope(ctx, c, alias)
	if errors.Is(err, blobhub.ErrNotFound) {
		return obj, nil, exit.Errorf(exit.CodeNoThread, "there is no thread %q", alias)
	}
	if err != nil {
		return obj, nil, blobhub.AsExit(err, "download "+alias)
	}
	env, err := envelope.Parse(obj.Value)
	if err != nil || !env.IsJob() {
		return obj, nil, exit.Errorf(exit.CodeNotJob, "%q is not a job thread", alias)
	}
	return obj, env, nil
}

// tooLargeEnvelope is download's answer to an envelope larger than
// envelope.MaxSize. Of a thread this state tree runs, the run goes on with
// the wire taken to be as this tree last left it (the local state): on
// the idle path nothing needs the envelope, and a thread that is merely
// big is never failed for it; only a run that must act on it (a turn, an
// activation) fails it, ENVELOPE_TOO_LARGE. Anything else is not a job
// bhw-run can read (65).
func (a *activation) tooLargeEnvelope(err error) error {
	// The first download of a thread this tree has never run comes before
	// its record is read (there is none): a.rec is nil then.
	st := ""
	if a.rec != nil && a.rec.t != nil {
		st = a.rec.t.Agent.State
	}
	if !a.holds() || st == "" {
		return exit.Errorf(exit.CodeNotJob, "%q is not a job thread bhw-run can read: %v (the most bhw-run reads of an envelope is %d bytes); shrink it", a.alias, err, envelope.MaxSize)
	}
	a.log.Warn("the thread's envelope is too large to read; the run goes on as the thread was, and fails it if it must act", "error", err.Error(), "max_bytes", envelope.MaxSize)
	a.read.tooLarge = err
	a.env = &envelope.Envelope{Type: "thread", HasAgent: true, HasInstance: true, State: st, Bad: map[string]string{}}
	return nil
}

// failTooLarge fails a thread whose envelope is too large to read: locally
// and with its thread_failed item; not on the wire, where failed would mean
// rewriting the value bhw-run refuses to read.
func (a *activation) failTooLarge(ctx context.Context) error {
	return a.fail(ctx, agent.Errorf(exit.CodeEnvelopeTooLarge, "the thread's envelope is larger than the %d bytes bhw-run reads (%v); shrink it (keep large data in items or artifacts): the next run then marks the thread failed on BlobHub, and `bhw-run thread retry` hands it off again", envelope.MaxSize, a.read.tooLarge))
}

// holds reports whether this state tree has a record of the thread.
func (a *activation) holds() bool { return holdsThread(a.r.Setup.JobDir, a.alias) }

// threadRead is what this run's reads of the thread (download, readItems)
// found that thread.yaml does not keep, for the run to decide and act on.
type threadRead struct {
	// tooLarge: the envelope is too large to read (tooLargeEnvelope).
	tooLarge error
	// unread: the last read of the thread stopped at its bound.
	unread bool
	// answer is the open prompt's answer findAnswer met past the bound of
	// pending_inbound, when none of pending_inbound answers it.
	answer *envelope.InboundItem
}

// Bounds on a person's messages. A thread keeps the messages it has read
// but not delivered in thread.yaml (pending_inbound), which every run of
// it reads and writes, so what a flood may make a run carry is bounded:
// a read stops keeping messages once PendingItems or PendingBytes are
// held, and the rest stays on BlobHub, after the cursor, for the next run,
// which delivers them in its own turn; nothing is lost. One message gives
// the agent at most MaxPersonItemBytes: a longer one keeps its head and
// tail around a note saying how much was left out (the whole message stays
// on BlobHub). Tests shrink the first two.
var (
	PendingItems       = 1000
	PendingBytes       = 4 << 20
	MaxPersonItemBytes = 256 << 10
)

// readItems tails the thread after items.scanned, keeping person items not
// yet delivered in pending_inbound and skipping our own. One read stops at
// blobhub.TailLimits, or once pending_inbound holds its bound; a.read.unread
// then says the next run reads on from the cursor saved here, when the
// bound of the tail stopped it. A prompt waiting for an answer that lies
// past the bound is answered all the same: findAnswer looks past it.
func (a *activation) readItems(ctx context.Context) error {
	a.rec.mu.Lock()
	from := a.scanFrom()
	held, size := len(a.rec.t.Items.PendingInbound), 0
	for _, in := range a.rec.t.Items.PendingInbound {
		size += inboundSize(in)
	}
	awaiting := a.rec.t.Prompt != nil && a.rec.t.Prompt.CreatedAt != "" && a.answerIndex() < 0
	a.rec.mu.Unlock()
	full := func() bool { return held >= PendingItems || size >= PendingBytes }
	var promptAt time.Time
	if awaiting {
		promptAt, _ = blobhub.ParseTime(a.rec.t.Prompt.CreatedAt)
	}
	answers := func(in envelope.InboundItem) bool {
		t, err := blobhub.ParseTime(in.CreatedAt)
		return err == nil && t.After(promptAt)
	}
	var fresh []envelope.InboundItem
	cur, more, stopped := from, false, full()
	if !stopped {
		var err error
		cur, more, err = a.tail(ctx, from, func(in envelope.InboundItem) bool {
			fresh = append(fresh, in)
			held, size = held+1, size+inboundSize(in)
			if awaiting && answers(in) {
				awaiting = false
			}
			stopped = full()
			return !stopped
		})
		if err != nil {
			return err
		}
	}
	a.read.unread = more && !stopped
	switch {
	case stopped:
		a.log.Info("read the thread up to the person messages one run keeps; the next runs read on", "pending", held)
	case more:
		a.log.Info("read the thread up to the bound of one run; the next run reads on", "items", len(fresh))
	}
	a.rec.mu.Lock()
	a.rec.t.Items.PendingInbound = append(a.rec.t.Items.PendingInbound, fresh...)
	a.rec.t.Items.Scanned = scannedOf(cur)
	a.rec.mu.Unlock()
	if awaiting && stopped {
		return a.findAnswer(ctx, cur, answers)
	}
	return nil
}

// findAnswer looks past the bound of pending_inbound, from cur, for the
// first person item that answers the open prompt, keeping nothing else and
// moving no cursor: the messages before it are read again, and delivered,
// by the runs after the one it resumes (the answer itself is consumed, so
// it is not delivered twice). Without it a turn that parked after a flood
// would wait for an answer it never reads.
func (a *activation) findAnswer(ctx context.Context, cur blobhub.Cursor, answers func(envelope.InboundItem) bool) error {
	_, _, err := a.tail(ctx, cur, func(in envelope.InboundItem) bool {
		if answers(in) {
			a.read.answer = &in
			return false
		}
		return true
	})
	return err
}

// tail reads the thread from cur and hands each person item not yet
// delivered to keep (which returns false to stop), skipping our own. It
// returns the cursor after the last item read and whether the tail's bound
// stopped it.
func (a *activation) tail(ctx context.Context, cur blobhub.Cursor, keep func(envelope.InboundItem) bool) (blobhub.Cursor, bool, error) {
	var idErr error
	next, more, err := blobhub.TailEach(ctx, a.r.Client, a.alias, cur, blobhub.TailLimits, func(it blobhub.Item) bool {
		if a.self.userID == "" {
			// No identity.yaml yet: who we are tells our own items from a
			// person's. Asked once; without it the read is dropped.
			var id *setup.Identity
			if id, idErr = setup.CheckIdentity(ctx, a.r.Client, a.r.Setup.StateDir); idErr != nil {
				return false
			}
			a.self.userID = id.UserID
		}
		if it.UserID == a.self.userID || hasType(it.Metadata) || a.consumedLocked(it.ID) {
			return true
		}
		return keep(inboundOf(it))
	})
	if idErr != nil {
		return cur, false, idErr
	}
	if err != nil {
		return cur, false, blobhub.AsExit(err, "read items of "+a.alias)
	}
	return next, more, nil
}

// scannedCursor and scannedOf map thread.yaml's scanned to a tail cursor
// and back.
func scannedCursor(s envelope.Scanned) blobhub.Cursor {
	c := blobhub.Cursor{CreatedAt: s.CreatedAt, IDs: s.IDs, Since: s.Since}
	for _, r := range s.Ahead {
		c.Ahead = append(c.Ahead, blobhub.Stamp{ID: r.ItemID, CreatedAt: r.CreatedAt})
	}
	return c
}

func scannedOf(c blobhub.Cursor) envelope.Scanned {
	s := envelope.Scanned{CreatedAt: c.CreatedAt, IDs: c.IDs, Since: c.Since}
	for _, st := range c.Ahead {
		s.Ahead = append(s.Ahead, envelope.ItemRef{ItemID: st.ID, CreatedAt: st.CreatedAt})
	}
	return s
}

// consumedLocked is consumed without a.rec.mu: TailEach's callback runs on the
// reading goroutine while nothing else changes pending_inbound.
func (a *activation) consumedLocked(id string) bool { return a.consumed(id) }

func (a *activation) consumed(id string) bool {
	for _, p := range a.rec.t.Items.PendingInbound {
		if p.ID == id {
			return true
		}
	}
	return id == a.rec.t.Items.LastConsumed.ItemID
}

func hasType(meta json.RawMessage) bool {
	var m struct {
		Type any `json:"type"`
	}
	return len(meta) > 0 && json.Unmarshal(meta, &m) == nil && m.Type != nil
}

// inboundOf is a person's item as pending_inbound keeps it: at most
// MaxPersonItemBytes of content, the largest blocks cut first, each keeping
// its head and tail around a note of how much was left out. A cut JSON
// block becomes text: its fenced copy would no longer be JSON.
func inboundOf(it blobhub.Item) envelope.InboundItem {
	in := envelope.InboundItem{ID: it.ID, CreatedAt: it.CreatedAt, UserID: it.UserID}
	var meta struct {
		Answers json.RawMessage `json:"answers"`
	}
	if json.Unmarshal(it.Metadata, &meta) == nil {
		in.Picked, _ = policy.ParsePicked(meta.Answers)
	}
	total := 0
	for _, b := range it.Content {
		if b.Type == "file" {
			if f, ok := attachmentOf(b); ok {
				in.Content = append(in.Content, envelope.ContentBlock{Type: "file", File: f})
			}
			continue
		}
		cb := envelope.ContentBlock{Type: b.Type, Text: b.Text}
		if len(b.JSON) > 0 {
			cb.JSON = string(b.JSON)
		}
		total += len(cb.Text) + len(cb.JSON)
		in.Content = append(in.Content, cb)
	}
	note := func(n int) string {
		return fmt.Sprintf("\n\n…[bhw-run: this message had %d bytes, more than the %d an agent is given; %d bytes were left out here]…\n\n", total, MaxPersonItemBytes, n)
	}
	for over := total - MaxPersonItemBytes; over > 0; {
		cb := &in.Content[largestBlock(in.Content)]
		s := cb.Text + cb.JSON
		cut := cutMiddle(s, max(len(s)-over-256, 1024), note)
		if len(cut) >= len(s) {
			break // every block is as short as a cut leaves it
		}
		over -= len(s) - len(cut)
		if cb.JSON != "" {
			cb.Type, cb.JSON = "text", ""
		}
		cb.Text = cut
	}
	return in
}

// largestBlock is the index of the content block with the most bytes.
func largestBlock(bs []envelope.ContentBlock) int {
	best := 0
	for i, b := range bs {
		if len(b.Text)+len(b.JSON) > len(bs[best].Text)+len(bs[best].JSON) {
			best = i
		}
	}
	return best
}

// inboundSize is what an item costs pending_inbound's byte bound.
func inboundSize(in envelope.InboundItem) int {
	n := len(in.ID) + len(in.CreatedAt) + len(in.UserID)
	for _, b := range in.Content {
		n += len(b.Type) + len(b.Text) + len(b.JSON)
	}
	return n
}

// facts gathers what the decision table needs.
func (a *activation) facts() Facts {
	t := a.rec.t
	local := t
	if t.Agent.State == "" && t.Workspace.AgentType == "" {
		local = nil
	}
	f := Facts{WireState: a.env.State, HasInstance: a.env.HasInstance, Local: local,
		Inbound: len(t.Items.PendingInbound), Now: time.Now(), Budget: a.budget()}
	f.Unfinished = len(a.rec.j.pending()) > 0 ||
		(t.Agent.State == envelope.StateFailed && !t.Agent.FailedOnWire && (a.env.State == envelope.StateActive || a.env.State == envelope.StatePending))
	if t.Prompt != nil && t.Prompt.ItemID != "" {
		f.Answered = a.answerIndex() >= 0 || a.read.answer != nil
	}
	return f
}

// answerIndex is the first pending person item after the open prompt.
func (a *activation) answerIndex() int {
	p := a.rec.t.Prompt
	if p == nil || p.CreatedAt == "" {
		return -1
	}
	pt, err := blobhub.ParseTime(p.CreatedAt)
	if err != nil {
		return -1
	}
	for i, in := range a.rec.t.Items.PendingInbound {
		if it, err := blobhub.ParseTime(in.CreatedAt); err == nil && it.After(pt) {
			return i
		}
	}
	return -1
}

// setWireState is the runner's read-modify-write of instance.state
// (docs/state.md): download, check the state is still `from`, change only
// the state, upload, read back.
func (a *activation) setWireState(ctx context.Context, from, to string) error {
	obj, err := downloadEnvelope(ctx, a.r.Client, a.alias)
	if errors.Is(err, blobhub.ErrNotFound) {
		return exit.Errorf(exit.CodeNoThread, "thread %q was deleted from BlobHub while this run worked on it; nothing was written to it", a.alias)
	}
	if err != nil {
		return blobhub.AsExit(err, "download "+a.alias)
	}
	cur, err := envelope.Parse(obj.Value)
	if err != nil {
		return exit.Errorf(exit.CodeUnavailable, "the envelope of %q changed into something unreadable; the next run decides", a.alias)
	}
	if cur.State != from {
		return exit.Errorf(exit.CodeStateChanged, "instance.state of %q changed from %s to %s meanwhile; the next run decides", a.alias, from, cur.State)
	}
	nv, err := envelope.WithState(obj.Value, to)
	if err != nil {
		return exit.Errorf(exit.CodeUnavailable, "cannot set instance.state: %v", err)
	}
	if err := a.r.Client.Upload(ctx, a.alias, nv); err != nil {
		return blobhub.AsExit(err, "upload "+a.alias)
	}
	back, err := downloadEnvelope(ctx, a.r.Client, a.alias)
	if err == nil && !jsonEqual(back.Value, nv) {
		a.log.Warn("a person changed the envelope while bhw-run wrote it; the next run decides", "state", to)
	}
	a.env.State = to
	return nil
}

func jsonEqual(x, y []byte) bool {
	var a, b any
	return json.Unmarshal(x, &a) == nil && json.Unmarshal(y, &b) == nil && reflect.DeepEqual(a, b)
}

// heldLocks is what a run holds of the state tree's locks: the thread
// lock (lockThread; Run releases it) and an agent slot (reserveSlot; close
// releases it).
type heldLocks struct {
	thread bool       // the run holds the thread lock
	slot   *lock.Slot // nil until reserveSlot
}

// reserveSlot takes an agent slot of the state tree (concurrency.max_agents), waiting up
// to --slot-wait behind the runs that queued earlier.
func (a *activation) reserveSlot(ctx context.Context) error {
	if a.locks.slot != nil {
		return nil
	}
	dir, maxAgents := filepath.Join(a.r.Setup.StateDir, "slots"), a.r.Setup.Config.Concurrency.MaxAgents
	if err := a.r.Setup.EnsureDir(filepath.Join(dir, "queue")); err != nil {
		return err
	}
	s, err := lock.WaitSlot(ctx, dir, maxAgents, 0)
	if errors.Is(err, lock.ErrNoSlot) && a.r.SlotWait > 0 {
		a.log.Info("every agent slot is taken; waiting for one", "max_agents", maxAgents, "slot_wait", a.r.SlotWait.String())
		s, err = lock.WaitSlot(ctx, dir, maxAgents, a.r.SlotWait)
	}
	switch {
	case errors.Is(err, lock.ErrNoSlot) && a.r.SlotWait > 0:
		return exit.Errorf(exit.CodeNoSlot, "no agent slot of this state tree (%d) was freed within --slot-wait %v; retry later, wait longer or raise concurrency.max_agents", maxAgents, a.r.SlotWait)
	case errors.Is(err, lock.ErrNoSlot):
		return exit.Errorf(exit.CodeNoSlot, "all %d agent slots of this state tree are taken; retry later, pass --slot-wait or raise concurrency.max_agents", maxAgents)
	case err != nil && ctx.Err() != nil:
		return exit.Errorf(exit.CodeNoSlot, "stopped while waiting for an agent slot; nothing was written, the next run starts over")
	case err != nil:
		// Not contention: a slot file or the queue cannot be used.
		return exit.Errorf(exit.CodeStateTreeInvalid, "cannot take an agent slot: %v; fix the state tree", err)
	}
	if s.Waited() > 0 {
		a.log.Info("took an agent slot after waiting", "slot", s.Index(), "waited_ms", s.Waited().Milliseconds())
	}
	a.locks.slot = s
	return nil
}

// lookAgain reads the envelope and the new items again after a wait for a
// slot, and decides again: a person may have stopped the thread or written
// more while the run waited. Without a wait, d stands.
func (a *activation) lookAgain(ctx context.Context, d Decision) (Decision, error) {
	if a.locks.slot.Waited() == 0 {
		return d, nil
	}
	if err := a.download(ctx); err != nil {
		return d, err
	}
	if err := a.readItems(ctx); err != nil {
		return d, err
	}
	d = Decide(a.facts())
	a.log.Debug("decided again after the wait", "row", d.Row.String(), "unfinished", d.Unfinished, "acts", d.Acts)
	return d, nil
}

func (a *activation) turnInterrupted() bool {
	st := a.rec.t.Turn.State
	return (st == envelope.TurnStateRunning || st == envelope.TurnStateInterrupted) && len(a.rec.t.Turn.InboundIDs) > 0
}

// writeSectionLog appends the run's record to logs/section.log.
func (a *activation) writeSectionLog(sum *Summary) {
	if a.dir == "" {
		return
	}
	a.r.appendSectionLog(map[string]any{"event": "run", "summary": sum})
}

// appendSectionLog appends one JSON record to logs/section.log, as
// redact.ShownJSON (a person may tail it). A record that cannot be written is
// only warned about: the log is a report, not state a run depends on.
func (r *Runner) appendSectionLog(rec map[string]any) {
	if r.Setup == nil || r.Setup.JobDir == "" {
		return
	}
	dir := filepath.Join(r.Setup.JobDir, "logs")
	rec["time"], rec["pid"] = now(), os.Getpid()
	b, _ := json.Marshal(rec)
	err := r.Setup.EnsureDir(dir)
	var f *os.File
	if err == nil {
		f, err = statefile.Open(filepath.Join(dir, "section.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	}
	if err == nil {
		_, err = f.Write(append(redact.ShownJSON(r.Setup.Secrets.Redact(b)), '\n'))
		err = errors.Join(err, f.Close())
	}
	if err != nil && r.Logger != nil {
		r.Logger.Warn("could not write section.log; fix the state tree", "error", r.Setup.Secrets.String(err.Error()))
	}
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

// logf writes one of run's own lines to thread.log; a peek (ls, which
// opens no thread.log) writes none.
func (a *activation) logf(format string, args ...any) {
	if a.tlog == nil {
		return
	}
	a.tlog.Printf(agent.StreamRun, format, args...)
}
