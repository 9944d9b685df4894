package run

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/lock"
	"github.com/blobhub/bhw-run/setup"
)

// Discovery for schedulers: the job threads of the section,
// each judged by the same decision table a run uses, fed what ls has read.
// ls takes no thread lock and writes nothing but not_mine.yaml (under the
// section lock) and its record in section.log; never thread.yaml.

// Listing is one job thread of the section.
type Listing struct {
	Alias string `json:"alias"`
	// State is instance.state on the wire; StateNone without one.
	State string `json:"state"`
	// Local is agent.state of thread.yaml; "" without a record.
	Local string `json:"local_state"`
	// Row is the row of the decision table that decides a run now.
	Row string `json:"row"`
	// Runnable: a run would act now (not_here threads never are).
	Runnable bool `json:"runnable"`
	// Locked: a run holds the thread lock right now (probed only for
	// runnable threads).
	Locked bool `json:"locked,omitempty"`
	// Waiting: the thread is parked on a question and no answer has come
	// (plain ls shows its state as "waiting").
	Waiting bool `json:"waiting_on_person,omitempty"`
	// WaitingSince is when the oldest person message a run would deliver
	// was posted, or without one when the envelope last changed (a hand-off
	// to pending, a stop); "" when neither is known. --runnable lists the
	// oldest first.
	WaitingSince string `json:"waiting_since,omitempty"`
	// Error says why this state tree's record of the thread cannot be
	// read (an unparsable thread.yaml, a file that is not a regular one);
	// such a thread is listed without it and never runnable.
	Error string `json:"error,omitempty"`

	// wake is when a hold on the thread ends (a provider's limit): it is
	// not runnable now, and will be then without a change on the wire.
	wake time.Time
}

// ErrThreadsUnreadable is the cause of List's error when the records of
// some threads could not be read: every other thread is listed, and the
// caller prints the listing before it fails.
var ErrThreadsUnreadable = errors.New("the state of some threads cannot be read")

// StateNone is the listed state of a job thread without instance.state.
const StateNone = "none"

// reasonTooLarge is the not_mine.yaml reason of an object whose value is
// too large to read as an envelope (checked again after a day).
const reasonTooLarge = "value too large for an envelope"

// StateUnknown is the listed state of a thread this state tree holds whose
// envelope BlobHub answered garbled (Listing.Error says so).
const StateUnknown = "unknown"

// ListOptions narrows a listing.
type ListOptions struct {
	States   []string // wire states to keep (StateNone included); empty keeps all
	Runnable bool     // keep only runnable threads whose lock is free
	// Emit, when set, is handed the listing before a pass that read the
	// change feed moves its cursor, so a cursor never passes a change whose
	// thread was not printed; an error keeps the cursor where it was.
	Emit func([]Listing) error

	quiet bool // a pass of --wait: no section.log record when it lists nothing
}

// List is `bhw-run ls`. A full listing costs 1 + N_jobs + N_active × pages
// requests: the object list, one download per job thread (non-jobs are
// cached in not_mine.yaml; aliases under a job thread's artifacts/ are
// skipped), and a tail of every thread active on the wire and here.
// --runnable reads the session's change feed instead (feed.go) and judges
// only the threads it names and those the last pass left due.
func (r *Runner) List(ctx context.Context, o ListOptions) (out []Listing, err error) {
	ls := &lister{r: r, o: o, start: time.Now(), jobs: map[string]bool{}, notMine: map[string]string{}, tooLarge: map[string]error{}, due: map[string]string{}}
	out = []Listing{}
	r.Setup.LogIgnored(r.Logger)
	defer func() {
		if !o.quiet || len(out) > 0 || err != nil {
			ls.record(len(out), err)
		}
	}()

	if err := r.Setup.EnsureDir(r.Setup.JobDir); err != nil {
		return out, err
	}
	if o.Runnable && len(o.States) == 0 && r.Setup.Config.Discovery.FullEvery() > 0 {
		return ls.pass(ctx)
	}
	out, err = ls.all(ctx)
	return out, ls.emit(out, err)
}

// emit hands the listing to Emit (also when some threads could not be
// read: the others are listed before the pass fails).
func (ls *lister) emit(out []Listing, err error) error {
	if ls.o.Emit == nil || err != nil && !errors.Is(err, ErrThreadsUnreadable) {
		return err
	}
	return errors.Join(ls.o.Emit(out), err)
}

// all is the full listing: every object of the session, judged.
func (ls *lister) all(ctx context.Context) (out []Listing, err error) {
	r := ls.r
	out = []Listing{}
	aliases, found, err := ls.objects(ctx)
	if err == nil && !found {
		ls.info("ls: the session holds nothing yet; " + r.Setup.Where())
	}
	if err != nil || !found {
		return out, err
	}
	if ls.id, err = setup.LoadIdentity(r.Setup.StateDir); err != nil {
		return out, err
	}
	ls.cache = setup.LoadNotMine(r.Setup.JobDir)
	for _, alias := range aliases {
		if err := ls.consider(ctx, alias, &out); err != nil {
			return out, err
		}
	}
	if len(ls.jobs) == 0 {
		ls.info("ls: no job threads found in " + r.Setup.Where())
	}
	return ls.finish(ctx, out)
}

// consider judges one alias and adds its listing to out when the options
// keep it; what ls learnt of it (a job, not one, unreadable, due again)
// stays on ls. Only an error that ends the pass is returned.
func (ls *lister) consider(ctx context.Context, alias string, out *[]Listing) error {
	r, o := ls.r, ls.o
	env, updatedAt, err := ls.job(ctx, alias)
	if errors.Is(err, errMalformed) {
		// A thread this tree holds, answered garbled: the wire's
		// fault, which must not hide the other threads either.
		ls.unread = append(ls.unread, alias)
		r.Logger.Warn("ls: BlobHub answered a thread this state tree holds with a value that is not a JSON object; it is listed without a state and never runnable, and ls exits 75", "alias", alias, "error", err.Error())
		if !o.Runnable && len(o.States) == 0 {
			*out = append(*out, Listing{Alias: alias, State: StateUnknown, Error: err.Error()})
		}
		return nil
	}
	if err != nil {
		return err
	}
	if env == nil || ls.tooLarge[alias] == nil && !wantState(o.States, listedState(env)) {
		return nil
	}
	l, keep, err := ls.listing(ctx, alias, env, updatedAt)
	if isStateError(err) {
		// One thread's record must not hide the others: a pass that
		// fails on it would run none of them again.
		ls.bad = append(ls.bad, alias)
		r.Logger.Error("ls: this state tree's record of a thread cannot be read; it is listed without it and never runnable: fix or move aside the file named", "alias", alias, "error", err.Error())
		l = Listing{Alias: alias, State: listedState(env), Error: err.Error()}
		keep = !o.Runnable
	} else if err != nil {
		return err
	}
	switch {
	case l.Runnable:
		ls.due[alias] = "" // locked or not: judged again until it is not
	case !l.wake.IsZero():
		ls.due[alias] = blobhub.FormatTime(l.wake)
	}
	if keep {
		*out = append(*out, l)
	}
	return nil
}

// finish caches what is not a job, orders a runnable listing and fails a
// pass that could not read some threads (after listing the others).
func (ls *lister) finish(ctx context.Context, out []Listing) ([]Listing, error) {
	r := ls.r
	if err := setup.AddNotMines(ctx, r.Setup.JobDir, ls.notMine); err != nil {
		r.Logger.Warn("ls: could not update not_mine.yaml", "error", err)
	}
	if ls.o.Runnable {
		oldestFirst(out)
	}
	for _, alias := range append(slices.Clone(ls.bad), ls.unread...) {
		ls.due[alias] = "" // read again on the next pass
	}
	switch {
	case len(ls.bad) > 0:
		return out, &exit.Error{Exit: exit.Config, Code: exit.CodeStateTreeInvalid, Err: ErrThreadsUnreadable,
			Message: fmt.Sprintf("the state of %d thread(s) could not be read (%s), see the records above; the other threads are listed", len(ls.bad), strings.Join(ls.bad, ", "))}
	case len(ls.unread) > 0:
		return out, &exit.Error{Exit: exit.TempFail, Code: exit.CodeUnavailable, Err: ErrThreadsUnreadable,
			Message: fmt.Sprintf("BlobHub answered %d thread(s) this state tree holds with a garbled value (%s); the other threads are listed, the next ls reads them again", len(ls.unread), strings.Join(ls.unread, ", "))}
	}
	return out, nil
}

// isStateError reports whether err is about this state tree's files
// (STATE_INVALID, INSECURE_STATE_PERMISSIONS).
func isStateError(err error) bool {
	var ee *exit.Error
	return errors.As(err, &ee) && (ee.Code == exit.CodeStateTreeInvalid || ee.Code == exit.CodeInsecurePermissions)
}

// lister is one `bhw-run ls`: what it has learnt and what it cost.
type lister struct {
	r        *Runner
	o        ListOptions
	start    time.Time
	id       *setup.Identity
	cache    setup.NotMine
	jobs     map[string]bool   // the job threads seen so far
	notMine  map[string]string // objects found not to be jobs, to cache
	tooLarge map[string]error  // threads this tree holds whose envelope is too large to read
	bad      []string          // threads whose record here cannot be read
	unread   []string          // threads this tree holds that BlobHub answered garbled
	// due are the threads the next pass judges again without a change
	// (feed.go): alias → "" or the time a hold ends.
	due  map[string]string
	full bool // the pass listed every object

	downloads, tails, events int
}

// record writes the listing's record to section.log.
func (ls *lister) record(listed int, err error) {
	rec := map[string]any{"event": "ls", "section": ls.r.Setup.Section.Name, "runnable_only": ls.o.Runnable,
		"states": ls.o.States, "listed": listed, "downloads": ls.downloads, "tails": ls.tails, "events": ls.events, "full": ls.full,
		"duration_ms": time.Since(ls.start).Milliseconds()}
	if err != nil {
		rec["error"] = err.Error()
	}
	ls.r.appendSectionLog(rec)
}

// objects lists the session's aliases, sorted: a thread comes before
// every alias under its artifacts/. found is false for a local store's
// session never written, which has no threads yet.
func (ls *lister) objects(ctx context.Context) (aliases []string, found bool, err error) {
	r := ls.r
	aliases, err = r.Client.List(ctx)
	if errors.Is(err, blobhub.ErrNotFound) {
		if strings.HasPrefix(r.Setup.APIURL, "file://") {
			// A local store's session exists once something is written to it.
			return nil, false, nil
		}
		return nil, false, exit.Errorf(exit.CodeSessionNotFound, "session %s was not found on BlobHub; check the revision_id and session_id of %s", r.Setup.Section.Session.SessionID, r.Setup.Where())
	}
	if err != nil {
		return nil, false, blobhub.AsExit(err, "list_session_objects")
	}
	slices.Sort(aliases)
	return aliases, true, nil
}

// job is the envelope of alias, and when it was last written, when it is a
// job thread of the section; nil when it is not (or is not to be looked at:
// outside the prefix, worker, an artifact of a job, known not to be one,
// an alias no run accepts).
func (ls *lister) job(ctx context.Context, alias string) (*envelope.Envelope, string, error) {
	r := ls.r
	if !strings.HasPrefix(alias, r.Setup.Section.Prefix()) || alias == setup.WorkerAlias || underJob(alias, ls.jobs) {
		return nil, "", nil
	}
	if e, ok := ls.cache.Aliases[alias]; ok && e.Cached(ls.start) && (e.Reason == setup.ReasonArtifact || !holdsThread(r.Setup.JobDir, alias)) {
		// (An entry for a thread this tree holds is stale: never trusted.)
		return nil, "", nil
	}
	if setup.ValidateAlias(alias) != nil {
		// No run can take it (exit 64); nothing to list.
		r.Logger.Debug("ls: skipping an alias no run accepts", "alias", alias)
		return nil, "", nil
	}
	ls.downloads++
	obj, err := downloadEnvelope(ctx, r.Client, alias)
	if errors.Is(err, blobhub.ErrTooLarge) {
		if !holdsThread(r.Setup.JobDir, alias) {
			ls.notMine[alias] = reasonTooLarge
			return nil, "", nil
		}
		// Judged as a run would (tooLargeEnvelope): on what this tree
		// last knew of it.
		ls.tooLarge[alias] = err
		ls.jobs[alias] = true
		return &envelope.Envelope{Type: "thread", HasAgent: true, HasInstance: true, Bad: map[string]string{}}, "", nil
	}
	if errors.Is(err, blobhub.ErrNotFound) {
		return nil, "", nil // deleted since the list
	}
	if err != nil {
		return nil, "", blobhub.AsExit(err, "download "+alias)
	}
	env, perr := envelope.Parse(obj.Value)
	holds := holdsThread(r.Setup.JobDir, alias)
	if perr != nil && holds {
		return nil, "", malformed(alias, perr)
	}
	if perr != nil || !env.IsJob() {
		// An object of type thread is never cached: a person may give it
		// an agent block at any moment; nor is a thread this tree holds.
		if reason, cache := notJobReason(env); cache && !holds {
			ls.notMine[alias] = reason
		}
		return nil, "", nil
	}
	ls.jobs[alias] = true
	return env, obj.UpdatedAt, nil
}

// listing judges one job thread; keep says whether --runnable keeps it
// (runnable, and its lock free).
func (ls *lister) listing(ctx context.Context, alias string, env *envelope.Envelope, updatedAt string) (l Listing, keep bool, err error) {
	l, read, err := ls.r.judge(ctx, alias, env, updatedAt, ls.id, ls.tooLarge[alias])
	if read {
		ls.tails++
	}
	if ee := (*exit.Error)(nil); errors.As(err, &ee) && ee.Code == exit.CodeNoThread {
		return l, false, nil // deleted since the list: its items answer invalid_thread_envelope
	}
	if err != nil || !ls.o.Runnable {
		return l, err == nil, err
	}
	if l.Runnable {
		held, err := lock.Held(filepath.Join(setup.ThreadDir(ls.r.Setup.JobDir, alias), "thread.lock"))
		if err != nil {
			// Not contention: the lock file cannot be probed.
			return l, false, exit.Errorf(exit.CodeStateTreeInvalid, "%v; check the state tree", err)
		}
		l.Locked = held
	}
	return l, l.Runnable && !l.Locked, nil
}

// oldestFirst orders runnable listings by WaitingSince, oldest first, so
// that a pass — which runs them in this order, and hands agent slots out in
// arrival order — serves the thread that has waited longest first, and a
// busy thread never keeps a quiet one waiting pass after pass. Listings
// without a time come last; ties keep alias order.
func oldestFirst(out []Listing) {
	at := make(map[string]time.Time, len(out))
	for _, l := range out {
		if t, err := blobhub.ParseTime(l.WaitingSince); err == nil {
			at[l.Alias] = t
		}
	}
	slices.SortStableFunc(out, func(x, y Listing) int {
		tx, okx := at[x.Alias]
		ty, oky := at[y.Alias]
		switch {
		case okx && oky:
			return tx.Compare(ty)
		case okx:
			return -1
		case oky:
			return 1
		}
		return 0
	})
}

// judge reads what a run would read of a job thread — thread.yaml, the
// journal and, for a thread active on the wire and here, the items after
// scanned — in memory only (peekThread), and asks the decision table.
// read says whether the items were read.
func (r *Runner) judge(ctx context.Context, alias string, env *envelope.Envelope, updatedAt string, id *setup.Identity, tooLarge error) (l Listing, read bool, err error) {
	l = Listing{Alias: alias, State: listedState(env)}
	userID := ""
	if id != nil {
		userID = id.UserID
	}
	p, err := r.peekThread(alias, env, userID)
	if err != nil {
		return l, false, err
	}
	t := p.Thread
	if tooLarge != nil {
		// The wire as this tree last left it; a run fails the thread only
		// if it must act (tooLargeEnvelope).
		env.State = t.Agent.State
		l.State, l.Error = StateUnknown, fmt.Sprintf("the envelope is larger than the %d bytes bhw-run reads: %v", envelope.MaxSize, tooLarge)
		r.Logger.Warn("ls: a thread's envelope is too large to read; a run fails the thread if it must act", "alias", alias, "error", tooLarge.Error())
	}
	l.Local = t.Agent.State
	unread := false
	if env.State == envelope.StateActive && t.Agent.State == envelope.StateActive {
		read = true
		if unread, err = p.readItems(ctx); err != nil {
			return l, read, err
		}
	}
	d := p.decide()
	l.Row = d.Row.String()
	if d.Held == HeldLimit {
		l.wake = p.wake()
	}
	// A read that stopped at its bound leaves items a run would read on.
	l.Runnable = (d.Acts || unread) && d.Row != RowNotHere
	l.Waiting = t.Prompt != nil && !l.Runnable && env.State == envelope.StateActive
	l.WaitingSince = waitingSince(t, updatedAt)
	return l, read, nil
}

// waitingSince is the created_at of the oldest person message a run would
// deliver — pending_inbound (with what ls has just read of an active
// thread) and the messages of a turn left running or interrupted — or,
// without one, updatedAt, the envelope's last change: when a pending
// thread was handed off (ls reads no items of a pending thread; its first
// message follows the hand-off) or a person stopped it. Both come from what
// ls reads anyway: no request is added.
func waitingSince(t *envelope.Thread, updatedAt string) string {
	var oldest time.Time
	consider := func(in []envelope.InboundItem) {
		for _, it := range in {
			if ts, err := blobhub.ParseTime(it.CreatedAt); err == nil && (oldest.IsZero() || ts.Before(oldest)) {
				oldest = ts
			}
		}
	}
	consider(t.Items.PendingInbound)
	if st := t.Turn.State; st == envelope.TurnStateRunning || st == envelope.TurnStateInterrupted {
		consider(t.Turn.Inbound)
	}
	if !oldest.IsZero() {
		return blobhub.FormatTime(oldest)
	}
	if ts, err := blobhub.ParseTime(updatedAt); err == nil {
		return blobhub.FormatTime(ts)
	}
	return ""
}

// notJobReason says why an object is not a job and whether to cache that.
func notJobReason(env *envelope.Envelope) (reason string, cache bool) {
	switch {
	case env == nil:
		return "not a JSON object", true
	case env.Type == "thread":
		return "", false
	case env.Type == setup.ReasonArtifact:
		return setup.ReasonArtifact, true
	case env.Type == "":
		return "no type", true
	}
	return "type " + env.Type, true
}

// underJob reports whether alias lies under <job thread>/artifacts/.
func underJob(alias string, jobs map[string]bool) bool {
	for i := 0; ; {
		j := strings.Index(alias[i:], "/artifacts/")
		if j < 0 {
			return false
		}
		if jobs[alias[:i+j]] {
			return true
		}
		i += j + 1
	}
}

func listedState(env *envelope.Envelope) string {
	if !env.HasInstance || env.State == "" {
		return StateNone
	}
	return env.State
}

func wantState(states []string, s string) bool {
	return len(states) == 0 || slices.Contains(states, s)
}
