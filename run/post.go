package run

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/policy"
)

// emit journals an item for the job thread and posts it: every agent event
// is journaled, written to thread.log, then posted.
func (a *activation) emit(it agent.Item) *emission {
	a.rec.mu.Lock()
	e, err := a.rec.j.add(a.alias, it, "")
	a.rec.mu.Unlock()
	if err != nil {
		a.stateFault(err)
		return nil
	}
	a.logf("emit %s %s %s", e.ID, e.Item.Type(), mustJSON(e.Item.Meta))
	a.poster.post(context.Background(), e)
	return e
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
// and spending on a turn nobody can read. It reports whether a turn ran.
func (a *activation) stopTurnFor(cause error) bool {
	a.rec.mu.Lock()
	stop := a.agentTurn.stop
	a.rec.mu.Unlock()
	if stop != nil {
		a.log.Warn("stopping the agent: its thread is gone")
		stop(cause)
	}
	return stop != nil
}

// notePosted is the run's part of a confirmed post (poster.confirmed,
// under rec.mu): the summary's count and the observer.
func (a *activation) notePosted(e *emission, item blobhub.Item) {
	a.report.sum.ItemsPosted++
	if a.report.prog.watched() {
		a.report.prog.posted(e.Target, shownItem(e, item))
	}
}

// replayIntent finishes an intent the journal holds open for reconcile:
// an artifact upload (replayArtifact) or a publication the last run left
// open (run/publish.go), returning the later emissions it settled.
func (a *activation) replayIntent(ctx context.Context, e *emission, later []*emission) (map[string]bool, error) {
	if e.Kind == kindArtifact {
		return nil, a.replayArtifact(ctx, e)
	}
	return a.replayPublish(e, later)
}

// usePoster makes the activation's poster, once its record is read.
func (a *activation) usePoster() {
	a.poster = &poster{client: a.r.Client, alias: a.alias, jobDir: a.r.Setup.JobDir, logRef: a.logRef(),
		log: a.log, rec: a.rec, run: a}
}

// shownItem is e as BlobHub now holds it, for the observer: the journaled
// item (secrets already redacted) with the server's id and time.
func shownItem(e *emission, answer blobhub.Item) blobhub.Item {
	it := newItem(e.Item)
	return blobhub.Item{ID: answer.ID, CreatedAt: answer.CreatedAt, UserID: answer.UserID,
		Content: it.Content, Metadata: it.Metadata, ParentID: answer.ParentID}
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
	if err := a.rec.save(); err != nil {
		return err
	}
	a.poster.post(ctx, e)
	return nil
}

// resolvePrompt drops the open prompt from thread.yaml (not yet saved)
// and journals its pending_prompt_resolved with resolution, cancelled or
// failed, and reason; nil when no prompt is open.
func (a *activation) resolvePrompt(resolution, brief, reason string) (*emission, error) {
	p := a.rec.t.Prompt
	if p == nil {
		return nil, nil
	}
	a.rec.t.Prompt = nil
	return a.rec.j.resolution(a.alias, p.ItemID, resolutionItem(p, resolution, brief, nil, reason))
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
