package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/policy"
	"github.com/blobhub/bhw-run/setup"
)

// emit journals an item for the job thread and posts it: every agent event
// is journaled, written to thread.log, then posted.
func (a *activation) emit(it agent.Item) *emission {
	a.mu.Lock()
	e, err := a.j.add(a.alias, it, "")
	a.mu.Unlock()
	if err != nil {
		a.stateFault(err)
		return nil
	}
	a.logf("emit %s %s %s", e.ID, e.Item.Type(), mustJSON(e.Item.Meta))
	a.post(context.Background(), e)
	return e
}

// post sends one journaled emission, never blindly twice: an ambiguous
// failure is reconciled by listing the thread for its emission_id.
func (a *activation) post(ctx context.Context, e *emission) {
	if e == nil || a.offline {
		return
	}
	// The journal decides: an emission it already holds as posted (or
	// dropped) is never sent again, whoever asks twice (a turn started
	// over after a failed resume acknowledges the same answer again).
	a.mu.Lock()
	settled := a.j.settled(e.ID)
	a.mu.Unlock()
	if settled {
		return
	}
	ctx = context.WithoutCancel(ctx)
	p := a.poster()
	item, err := p.send(ctx, e, newItem(fitItem(e.Item, ItemBudget, a.logRef())))
	if errors.Is(err, blobhub.ErrItemTooLarge) {
		item, err = p.send(ctx, e, newItem(stubItem(e.Item, itemSize(e.Item), a.logRef())))
	}
	var api *blobhub.APIError
	var undecided *exit.Error
	switch {
	case err == nil:
		a.confirmed(e, item)
	case errors.Is(err, blobhub.ErrNoThread) && e.Target == setup.WorkerAlias && a.remakeWorker(ctx):
		// The worker object was deleted: made again, the item goes to it.
		a.post(ctx, e)
	case errors.Is(err, blobhub.ErrNoThread):
		// invalid_thread_envelope: the thread is gone, which is no refusal
		// of the item; it waits in the journal with everything after it.
		a.log.Error("the thread is gone from BlobHub (deleted?); items stay journaled", "target", e.Target, "emission_id", e.ID, "error", err)
		a.offline = true
		if e.Target == a.alias {
			a.threadGone = true
			a.stopTurnFor(errThreadGone)
		}
	case errors.As(err, &undecided):
		// The search for an ambiguous post could not tell: posting again
		// might post it twice, so it waits, with everything after it.
		a.log.Warn("items stay journaled for the next run", "emission_id", e.ID, "error", undecided.Message)
		a.offline = true
	case errors.As(err, &api) && !errors.Is(err, blobhub.ErrAuth):
		a.log.Error("BlobHub refused an item for good; dropping it", "emission_id", e.ID, "error", err)
		a.mu.Lock()
		err := a.j.drop(e.ID)
		a.mu.Unlock()
		if err != nil {
			a.stateFault(err)
		}
	case errors.Is(err, blobhub.ErrAuth):
		a.log.Error("BlobHub refused the API key while posting; items stay journaled", "emission_id", e.ID)
		a.offline, a.authRefused = true, true
	default:
		a.log.Warn("BlobHub unreachable; items stay journaled for the next run", "emission_id", e.ID, "error", err)
		a.offline = true
	}
}

// logRef names the thread's thread.log as blobhub-worker names it in a
// cut item's local_log: relative to the jobs folder of the state tree,
// <job>/threads/<alias>/logs/thread.log.
func (a *activation) logRef() string {
	dir := a.dir
	if rel, err := filepath.Rel(filepath.Dir(a.r.Setup.JobDir), a.dir); err == nil && !strings.HasPrefix(rel, "..") {
		dir = rel
	}
	return filepath.ToSlash(filepath.Join(dir, "logs", "thread.log"))
}

// stopTurnFor interrupts the running turn, if one runs, with cause: the
// person deleted the thread, so the agent stops working in their folder
// and spending on a turn nobody can read.
func (a *activation) stopTurnFor(cause error) {
	a.mu.Lock()
	stop := a.stopTurn
	if stop != nil {
		a.turnStopped = true
	}
	a.mu.Unlock()
	if stop != nil {
		a.log.Warn("stopping the agent: its thread is gone")
		stop(cause)
	}
}

// poster is the BlobHub side of posting an emission, never blindly twice:
// a post whose outcome is unknown is looked for by its emission_id before
// it is sent again, and a search that cannot tell is an error. What the
// answer means for the journal and the thread is the activation's (post,
// confirmed, reconcile).
type poster struct {
	client blobhub.Client
	alias  string // the job thread
	log    *slog.Logger
	// lastPosted is the created_at of the job thread's last confirmed item,
	// where a search of the job thread starts.
	lastPosted func() string
}

// poster is the activation's poster.
func (a *activation) poster() poster {
	return poster{client: a.r.Client, alias: a.alias, log: a.log,
		lastPosted: func() string { return a.t.Items.LastPosted.CreatedAt }}
}

// send posts body, the form of e the server is sent; after an ambiguous
// failure it looks for e's emission_id and posts the same body again only
// when the server does not hold it.
func (p poster) send(ctx context.Context, e *emission, body blobhub.NewItem) (blobhub.Item, error) {
	item, err := p.client.Post(ctx, e.Target, body)
	if !errors.Is(err, blobhub.ErrAmbiguous) {
		return item, err
	}
	p.log.Warn("a post's outcome is unknown; looking for it before posting again", "emission_id", e.ID)
	found, err := p.find(ctx, e)
	switch {
	case err != nil:
		return blobhub.Item{}, err
	case found != nil:
		return *found, nil
	}
	return p.client.Post(ctx, e.Target, body)
}

// confirmed records that the server holds e.
func (a *activation) confirmed(e *emission, item blobhub.Item) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.j.confirm(e.ID, item.ID, item.CreatedAt); err != nil {
		// The next run finds the item by its emission_id: not posted twice.
		a.stateFault(err)
	}
	a.sum.ItemsPosted++
	a.noteFailurePosted(e)
	if a.prog.watched() {
		a.prog.posted(e.Target, shownItem(e, item))
	}
	if e.Target == a.alias {
		a.t.Items.LastPosted = envelope.ItemRef{ItemID: item.ID, CreatedAt: item.CreatedAt}
	}
	if p := a.t.Prompt; p != nil && p.EmissionID == e.ID {
		p.ItemID, p.CreatedAt = item.ID, item.CreatedAt
		_ = a.saveLocked()
	}
}

// shownItem is e as BlobHub now holds it, for the observer: the journaled
// item (secrets already redacted) with the server's id and time.
func shownItem(e *emission, answer blobhub.Item) blobhub.Item {
	it := newItem(e.Item)
	return blobhub.Item{ID: answer.ID, CreatedAt: answer.CreatedAt, UserID: answer.UserID,
		Content: it.Content, Metadata: it.Metadata, ParentID: answer.ParentID}
}

// find lists the target thread after last_posted and looks for the
// emission's id.
func (p poster) find(ctx context.Context, e *emission) (*blobhub.Item, error) {
	posted, err := p.since(ctx, e, map[string]bool{e.ID: true})
	if it, ok := posted[e.ID]; ok && err == nil {
		return &it, nil
	}
	return nil, err
}

// postedLimits bounds the search for posted emissions. It keeps only the
// items it is looking for, so it reads much further than a run's tail.
var postedLimits = blobhub.Limits{Items: 100000}

// since lists e's target thread from where e may have landed and maps
// the emission_ids of want found there to their items: after last_posted on
// the job thread; on worker, which has no cursor of ours, from an hour
// before e was journaled (clocks may differ). It stops once every id of
// want is found. A search that ends at postedLimits first cannot tell
// whether the rest was posted: that is an error, so nothing is posted
// again blindly; the emissions stay journaled for the next run.
func (p poster) since(ctx context.Context, e *emission, want map[string]bool) (map[string]blobhub.Item, error) {
	from := blobhub.Cursor{}
	if e.Target == p.alias {
		from.CreatedAt = p.lastPosted()
	} else if t, err := blobhub.ParseTime(e.At); err == nil {
		from.CreatedAt = blobhub.FormatTime(t.Add(-time.Hour))
	}
	found := map[string]blobhub.Item{}
	_, more, err := blobhub.TailEach(ctx, p.client, e.Target, from, postedLimits, func(it blobhub.Item) bool {
		var m struct {
			EmissionID string `json:"emission_id"`
		}
		if json.Unmarshal(it.Metadata, &m) == nil && want[m.EmissionID] {
			found[m.EmissionID] = it
		}
		return len(found) < len(want)
	})
	if errors.Is(err, blobhub.ErrNoThread) && e.Target == setup.WorkerAlias {
		// No worker thread (deleted): it holds none of them; posting one
		// makes it again.
		return found, nil
	}
	if err != nil {
		return nil, err
	}
	if more && len(found) < len(want) {
		return found, exit.Errorf(exit.CodeUnposted, "could not tell whether BlobHub holds %d journaled item(s) of %q: the thread has more than %d items after where they would be; they stay journaled and the next run looks again", len(want)-len(found), e.Target, postedLimits.Items)
	}
	return found, nil
}

// reconcile posts every unconfirmed emission, after looking for those the
// server already holds, and finishes journaled artifact uploads in journal
// order (docs/state.md).
func (a *activation) reconcile(ctx context.Context) error {
	pending := a.j.pending()
	if len(pending) == 0 {
		return nil
	}
	// Per target, in journal order: its first emission (the earliest
	// place to look from) and every emission id to look for.
	var firsts []*emission
	want := map[string]map[string]bool{}
	for _, e := range pending {
		if e.Kind == kindArtifact || e.Kind == kindPublish {
			continue
		}
		if want[e.Target] == nil {
			want[e.Target] = map[string]bool{}
			firsts = append(firsts, e)
		}
		want[e.Target][e.ID] = true
	}
	seen := map[string]map[string]blobhub.Item{}
	p := a.poster()
	for _, e := range firsts {
		found, err := p.since(ctx, e, want[e.Target])
		if err != nil {
			return blobhub.AsExit(err, "reconcile "+e.Target)
		}
		seen[e.Target] = found
	}
	dropped := map[string]bool{}
	for i, e := range pending {
		if dropped[e.ID] {
			continue
		}
		if e.Kind == kindArtifact {
			// An upload intent, not an item.
			if err := a.replayArtifact(ctx, e); err != nil {
				return err
			}
			continue
		}
		if e.Kind == kindPublish {
			// A publication the last run left open (run/publish.go).
			d, err := a.replayPublish(e, pending[i+1:])
			if err != nil {
				return err
			}
			for id := range d {
				dropped[id] = true
			}
			continue
		}
		if it, ok := seen[e.Target][e.ID]; ok {
			a.confirmed(e, it)
			continue
		}
		a.post(ctx, e)
		if a.offline {
			return exit.Errorf(exit.CodeUnavailable, "BlobHub is unreachable while posting journaled items; the next run retries")
		}
	}
	return nil
}

// unposted counts emissions still not confirmed.
func (a *activation) unposted() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.j.pending())
}

func newItem(it agent.Item) blobhub.NewItem {
	meta, _ := json.Marshal(it.Meta)
	return blobhub.NewItem{Content: contentOf(it), Metadata: meta}
}

// contentOf is the item's content: its text block, then its file blocks.
func contentOf(it agent.Item) []blobhub.Block {
	c := []blobhub.Block{{Type: "text", Text: it.Brief}}
	for _, f := range it.Files {
		c = append(c, blobhub.Block{Type: "file", File: &blobhub.FileRef{Alias: f.Alias, Name: f.Name, ContentType: f.ContentType, Size: f.Size}})
	}
	return c
}

// promptItem is the pending_prompt item for a recorded prompt, in
// blobhub-worker's shape: prompt {prompt_id, kind, prompt_state: pending,
// questions}. options (every option's label) and call (the call it is
// about, CallMeta) are bhw-run's own, beside them (docs/wire.md).
func promptItem(p *envelope.Prompt) agent.Item {
	c := promptCall(p)
	var b strings.Builder
	var options []map[string]any
	if p.Kind == policy.KindAskUserQuestion {
		b.WriteString("❓ The agent asks:")
		for qi, q := range c.Questions {
			fmt.Fprintf(&b, "\n%d. %s", qi+1, q.Question)
			for oi, o := range q.Options {
				fmt.Fprintf(&b, "\n   %d) %s", oi+1, o.Label)
				if o.Description != "" {
					fmt.Fprintf(&b, " — %s", o.Description)
				}
			}
			if q.MultiSelect {
				b.WriteString("\n   (several allowed: comma-separated numbers or labels)")
			}
		}
		b.WriteString("\nReply with one line per question: an option's number or label, or your own text.")
		for _, q := range c.Questions {
			for _, o := range q.Options {
				options = append(options, map[string]any{"label": o.Label, "description": o.Description})
			}
		}
	} else {
		fmt.Fprintf(&b, "❓ Approve %s?", c.Brief())
		if c.GrantRoot != "" {
			fmt.Fprintf(&b, "\n⚠ approving also lets the agent write anywhere under %s (grantRoot)", c.GrantRoot)
		}
		fmt.Fprintf(&b, "\n1) Approve\n2) Deny\nReply %s (any case) to approve; any other reply denies, and its text is passed on as the reason.", strings.Join(policy.ApprovalReplies, ", "))
		options = []map[string]any{{"label": "Approve"}, {"label": "Deny"}}
	}
	prompt := promptRef(p, "pending")
	prompt["questions"], prompt["options"], prompt["call"] = promptQuestions(p), options, agent.CallMeta(c)
	return agent.Item{Brief: b.String(), Meta: map[string]any{"type": agent.ItemPendingPrompt, "prompt": prompt}}
}

// promptCall is the call a recorded prompt is about, with its input.
func promptCall(p *envelope.Prompt) policy.Call {
	c := p.Call
	if p.InputJSON != "" {
		c.Input = json.RawMessage(p.InputJSON)
	}
	return c
}

// promptRef is the prompt block every prompt item carries: prompt_id
// (left out for a prompt recorded before bhw-run named its prompts), kind
// and prompt_state (pending, answered or cancelled).
func promptRef(p *envelope.Prompt, state string) map[string]any {
	m := map[string]any{"kind": p.Kind, "prompt_state": state}
	if p.PromptID != "" {
		m["prompt_id"] = p.PromptID
	}
	return m
}

// promptQuestions are a prompt's questions as blobhub-worker writes them
// in its items: an agent's own questions as the agent asked them, and for
// an approval one question with the options Approve and Deny, subject the
// tool's name and grant_key the tool and what it acts on, which is how the
// worker matches a person's approval to the call when it is tried again
// (docs/wire.md).
func promptQuestions(p *envelope.Prompt) []map[string]any {
	c := promptCall(p)
	if p.Kind == policy.KindAskUserQuestion {
		qs := make([]map[string]any, 0, len(c.Questions))
		for _, q := range c.Questions {
			opts := make([]map[string]any, 0, len(q.Options))
			for _, o := range q.Options {
				opts = append(opts, map[string]any{"label": o.Label, "description": o.Description})
			}
			qs = append(qs, map[string]any{"question": q.Question, "header": q.Header, "options": opts, "multiSelect": q.MultiSelect})
		}
		return qs
	}
	q := map[string]any{
		"question": "Approve " + c.Brief() + "?", "header": "permission", "subject": grantSubject(c),
		"options": []map[string]any{
			{"label": "Approve", "description": "run this call"},
			{"label": "Deny", "description": "refuse this call"},
		},
		"multiSelect": false,
	}
	if key := promptGrantKey(p); key != "" {
		q["grant_key"] = key // absent, as the worker leaves it, for a call it names by no key
	}
	return []map[string]any{q}
}

// callDetail is what a call acts on as its input names it: the command,
// else the file, else the path ("" when the input names none); agy's
// PascalCase keys in the worker's order (antigravity's grant key).
func callDetail(c policy.Call) string {
	var in map[string]any
	_ = json.Unmarshal(c.Input, &in)
	for _, k := range []string{"command", "file_path", "path", "CommandLine", "TargetFile", "AbsolutePath", "DirectoryPath", "SearchPath"} {
		if s, _ := in[k].(string); s != "" {
			return s
		}
	}
	return ""
}

// resolutionItem is the pending_prompt_resolved of p: prompt {prompt_id,
// kind, prompt_state, answers | reason} as blobhub-worker writes it, and
// bhw-run's own prompt_item_id (the prompt's item, the journal's key for
// one resolution per prompt) and resolution (answered, cancelled or
// failed; the worker has no failed, so its prompt_state is cancelled with
// the failure as the reason).
func resolutionItem(p *envelope.Prompt, resolution, brief string, answers []map[string]any, reason string) agent.Item {
	state := resolution
	if state == "failed" {
		state = "cancelled"
	}
	prompt := promptRef(p, state)
	if state == "answered" {
		prompt["answers"] = answers
	} else {
		prompt["reason"] = reason
	}
	return agent.Item{Brief: brief, Meta: map[string]any{
		"type": agent.ItemPendingPromptResolved, "prompt": prompt,
		"prompt_item_id": p.ItemID, "resolution": resolution,
	}}
}

// cancelPrompt resolves an open prompt as cancelled for reason (a stopped
// or re-pended thread).
func (a *activation) cancelPrompt(ctx context.Context, reason string) error {
	e, err := a.resolvePrompt("cancelled", "cancelled", reason)
	if err != nil || e == nil {
		return err
	}
	if err := a.save(); err != nil {
		return err
	}
	a.post(ctx, e)
	return nil
}

// resolvePrompt drops the open prompt from thread.yaml (not yet saved)
// and journals its pending_prompt_resolved with resolution, cancelled or
// failed, and reason; nil when no prompt is open.
func (a *activation) resolvePrompt(resolution, brief, reason string) (*emission, error) {
	p := a.t.Prompt
	if p == nil {
		return nil, nil
	}
	a.t.Prompt = nil
	return a.j.resolution(a.alias, p.ItemID, resolutionItem(p, resolution, brief, nil, reason))
}

// approvalAnswers is the answers block of an approval answered with label
// (Approve or Deny): one answer to its one question.
func approvalAnswers(p *envelope.Prompt, label string) []map[string]any {
	return []map[string]any{{"question": promptQuestions(p)[0]["question"], "answer": []string{label}}}
}

// questionAnswers is the answers block of an agent's questions: per
// question, the labels picked, or the person's own text.
func questionAnswers(qs []policy.Question, parsed []policy.Answer) []map[string]any {
	out := make([]map[string]any, 0, len(qs))
	for i, q := range qs {
		var picked []string
		if i < len(parsed) {
			picked = parsed[i].Labels
			if len(picked) == 0 && parsed[i].Free != "" {
				picked = []string{parsed[i].Free}
			}
		}
		if picked == nil {
			picked = []string{}
		}
		out = append(out, map[string]any{"question": q.Question, "answer": picked})
	}
	return out
}

// remakeWorker makes the session's worker object again, once per run,
// after a post to it found it gone (deleted while the run worked), with
// the same check of its owner as at the run's start. false when it was
// made again already or could not be.
func (a *activation) remakeWorker(ctx context.Context) bool {
	if a.workerRemade {
		return false
	}
	a.workerRemade = true
	a.log.Warn("the worker object is gone from BlobHub (deleted?); making it again")
	st, err := a.r.Setup.EnsureWorker(ctx, a.r.Client, a.userID)
	if err != nil {
		a.log.Error("could not make the worker object again; its items stay journaled", "error", err)
		return false
	}
	a.instanceID = st.InstanceID
	return true
}
