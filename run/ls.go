package run

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/lock"
)

// Discovery for schedulers (SPEC §11.3): the job threads of the section,
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
	// Row is the row of SPEC §6.2 that decides a run now.
	Row string `json:"row"`
	// Runnable: a run would act now (not_here threads never are).
	Runnable bool `json:"runnable"`
	// Locked: a run holds the thread lock right now (probed only for
	// runnable threads).
	Locked bool `json:"locked,omitempty"`
	// WaitingSince is when the oldest person message a run would deliver
	// was posted, or without one when the envelope last changed (a hand-off
	// to pending, a stop); "" when neither is known. --runnable lists the
	// oldest first.
	WaitingSince string `json:"waiting_since,omitempty"`
}

// StateNone is the listed state of a job thread without instance.state.
const StateNone = "none"

// ListOptions narrows a listing.
type ListOptions struct {
	States   []string // wire states to keep (StateNone included); empty keeps all
	Runnable bool     // keep only runnable threads whose lock is free
}

// List is `bhw-run ls`. Its cost is 1 + N_jobs + N_active × pages requests:
// the object list, one download per job thread (non-jobs are cached in
// not_mine.yaml; aliases under a job thread's artifacts/ are skipped), and
// a tail of every thread active on the wire and here.
func (r *Runner) List(ctx context.Context, o ListOptions) (out []Listing, err error) {
	start := time.Now()
	out = []Listing{}
	downloads, tails := 0, 0
	defer func() {
		rec := map[string]any{"event": "ls", "section": r.Setup.Section.Name, "runnable_only": o.Runnable,
			"states": o.States, "listed": len(out), "downloads": downloads, "tails": tails,
			"duration_ms": time.Since(start).Milliseconds()}
		if err != nil {
			rec["error"] = err.Error()
		}
		r.appendSectionLog(rec)
	}()

	aliases, err := r.Client.List(ctx)
	if errors.Is(err, blobhub.ErrNotFound) {
		if strings.HasPrefix(r.Setup.APIURL, "file://") {
			// A local store's session exists once something is written
			// to it: a session never written has no threads yet.
			return out, nil
		}
		return out, exitErr(CodeSessionNotFound, "session %s was not found on BlobHub; check the section's revision_id and session_id", r.Setup.Section.Session.SessionID)
	}
	if err != nil {
		return out, apiErr(err, "list_session_objects")
	}
	// Sorted, a thread comes before every alias under its artifacts/.
	slices.Sort(aliases)

	nm := loadNotMine(r.Setup.JobDir)
	id, err := LoadIdentity(r.Setup.StateDir)
	if err != nil {
		return out, err
	}
	prefix := r.Setup.Section.Prefix()
	jobs := map[string]bool{}
	notMine := map[string]string{}
	for _, alias := range aliases {
		if !strings.HasPrefix(alias, prefix) || alias == "worker" || underJob(alias, jobs) {
			continue
		}
		if e, ok := nm.Aliases[alias]; ok && e.cached(start) {
			continue
		}
		if ValidateAlias(alias) != nil {
			// No run can take it (exit 64); nothing to list.
			r.Logger.Debug("ls: skipping an alias no run accepts", "alias", alias)
			continue
		}
		downloads++
		obj, err := r.Client.Download(ctx, alias)
		if errors.Is(err, blobhub.ErrNotFound) {
			continue // deleted since the list
		}
		if err != nil {
			return out, apiErr(err, "download "+alias)
		}
		env, perr := envelope.Parse(obj.Value)
		if perr != nil || !env.IsJob() {
			// An object of type thread is never cached: a person may give
			// it an agent block at any moment.
			if reason, cache := notJobReason(env); cache {
				notMine[alias] = reason
			}
			continue
		}
		jobs[alias] = true
		if !wantState(o.States, listedState(env)) {
			continue
		}
		l, read, err := r.judge(ctx, alias, env, obj.UpdatedAt, id)
		if read {
			tails++
		}
		if err != nil {
			return out, err
		}
		if o.Runnable && l.Runnable {
			held, err := lock.Held(filepath.Join(ThreadDir(r.Setup.JobDir, alias), "thread.lock"))
			if err != nil {
				return out, exitErr(CodeLocked, "%v", err)
			}
			l.Locked = held
		}
		if o.Runnable && (!l.Runnable || l.Locked) {
			continue
		}
		out = append(out, l)
	}
	if err := addNotMines(ctx, r.Setup.JobDir, notMine); err != nil {
		r.Logger.Warn("ls: could not update not_mine.yaml", "error", err)
	}
	if o.Runnable {
		oldestFirst(out)
	}
	return out, nil
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
// scanned — in memory only, and asks Decide. read says whether the items
// were read.
func (r *Runner) judge(ctx context.Context, alias string, env *envelope.Envelope, updatedAt string, id *Identity) (l Listing, read bool, err error) {
	l = Listing{Alias: alias, State: listedState(env)}
	a := &activation{r: r, alias: alias, dir: ThreadDir(r.Setup.JobDir, alias), env: env, log: r.Logger.With("alias", alias), sum: &Summary{Alias: alias}}
	if id != nil {
		a.userID = id.UserID
	}
	if err := a.peek(); err != nil {
		return l, false, err
	}
	l.Local = a.t.Agent.State
	if env.State == envelope.StateActive && a.t.Agent.State == envelope.StateActive {
		read = true
		if err := a.readItems(ctx); err != nil {
			return l, read, err
		}
	}
	d := Decide(a.facts())
	l.Row = d.Row.String()
	// A read that stopped at its bound leaves items a run would read on.
	l.Runnable = (d.Acts || a.unread) && d.Row != RowNotHere
	l.WaitingSince = waitingSince(a.t, updatedAt)
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

// peek is load without a lock or a write: thread.yaml (missing = empty)
// and the journal, read only. A thread.yaml recording another alias is
// judged as no record, as a run would refuse it.
func (a *activation) peek() error {
	t, err := envelope.LoadThread(filepath.Join(a.dir, "thread.yaml"))
	if err != nil {
		return exitErr(CodeStateTreeInvalid, "%v", err)
	}
	if t == nil || t.Alias != a.alias {
		t = &envelope.Thread{Alias: a.alias}
	}
	a.t = t
	a.j, err = readJournal(filepath.Join(a.dir, "emissions.jsonl"), t.EmissionNonce)
	if err != nil {
		return exitErr(CodeStateTreeInvalid, "cannot read the emission journal of %q: %v", a.alias, err)
	}
	// The journal is not open for writing: a prompt that never reached
	// it is only counted as unfinished work, as a run would journal it.
	a.restorePrompt()
	return nil
}

// notJobReason says why an object is not a job and whether to cache that.
func notJobReason(env *envelope.Envelope) (reason string, cache bool) {
	switch {
	case env == nil:
		return "not a JSON object", true
	case env.Type == "thread":
		return "", false
	case env.Type == ReasonArtifact:
		return ReasonArtifact, true
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

// appendSectionLog appends one JSON record to logs/section.log.
func (r *Runner) appendSectionLog(rec map[string]any) {
	if r.Setup == nil || r.Setup.JobDir == "" {
		return
	}
	dir := filepath.Join(r.Setup.JobDir, "logs")
	if os.MkdirAll(dir, 0o700) != nil {
		return
	}
	f, err := os.OpenFile(filepath.Join(dir, "section.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	rec["time"], rec["pid"] = now(), os.Getpid()
	b, _ := json.Marshal(rec)
	_, _ = f.Write(append(redact(b, r.Secrets), '\n'))
}
