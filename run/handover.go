package run

// The hand-over with blobhub-worker: the daemon and bhw-run take turns on
// one thread, each reading what the other left in thread.yaml. What the
// daemon leaves that bhw-run's own records do not say is filled in here:
// its park (agent.park names only the prompt; the question itself is its
// pending_prompt item), its one-shot grant (agent.grant, spent as the
// worker spends it), and where it had read the thread to (it keeps no
// items.scanned). docs/state.md, "Sharing the tree with blobhub-worker".

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/policy"
)

// itemApprovalGranted is the item that says a call ran on a person's
// earlier approval, with nobody asked this time (the worker's type).
const itemApprovalGranted = "approval_granted"

// adoptScanItems bounds the items read to find the daemon's open prompt.
const adoptScanItems = 20000

// scanFrom is where the read of the thread starts: items.scanned, or, in a
// thread.yaml the daemon wrote (it keeps no scanned), the last person item
// a turn consumed, so what the daemon delivered is not delivered again.
func (a *activation) scanFrom() blobhub.Cursor {
	s := a.rec.t.Items.Scanned
	if s.CreatedAt == "" && len(s.Ahead) == 0 && a.rec.t.Items.LastConsumed.CreatedAt != "" {
		lc := a.rec.t.Items.LastConsumed
		return blobhub.Cursor{CreatedAt: lc.CreatedAt, IDs: []string{lc.ItemID}}
	}
	return scannedCursor(s)
}

// adoptPark completes a park blobhub-worker recorded: agent.park names the
// prompt (prompt_id, kind, subject) and nothing else, so its
// pending_prompt item is looked up on the thread by prompt_id, and the
// question, the call and the item's time taken from it; a person's answer
// after that time then answers it, as an answer to bhw-run's own prompt
// does. A park whose prompt the thread has resolved, or does not hold, is
// dropped, as the worker drops it: the thread's items say whether the
// question is still open.
func (a *activation) adoptPark(ctx context.Context) error {
	p := a.rec.t.Prompt
	if p == nil || p.ItemID != "" || p.EmissionID != "" {
		return nil // bhw-run's own prompt, or none
	}
	if p.PromptID == "" {
		a.log.Warn("dropping a park that names no prompt")
		a.rec.t.Prompt = nil
		return nil
	}
	var found *blobhub.Item
	resolved := false
	from := blobhub.Cursor{CreatedAt: a.rec.t.Items.LastConsumed.CreatedAt}
	_, more, err := blobhub.TailEach(ctx, a.r.Client, a.alias, from, blobhub.Limits{Items: adoptScanItems}, func(it blobhub.Item) bool {
		var m struct {
			Type   string `json:"type"`
			Prompt struct {
				PromptID string `json:"prompt_id"`
			} `json:"prompt"`
		}
		if json.Unmarshal(it.Metadata, &m) != nil || m.Prompt.PromptID != p.PromptID {
			return true
		}
		switch m.Type {
		case agent.ItemPendingPrompt:
			found = &it
		case agent.ItemPendingPromptResolved:
			resolved = true
			return false
		}
		return true
	})
	if err != nil {
		return blobhub.AsExit(err, "read items of "+a.alias)
	}
	switch {
	case resolved:
		a.log.Info("the daemon's prompt is resolved on the thread; the thread is not parked", "prompt_id", p.PromptID)
		a.rec.t.Prompt = nil
	case found == nil && more:
		return fmt.Errorf("the prompt %s the daemon parked on is not within the thread's next %d items; run again to read on, or answer it with the daemon", p.PromptID, adoptScanItems)
	case found == nil:
		a.log.Warn("the daemon's prompt is not on the thread; the thread is not parked", "prompt_id", p.PromptID)
		a.rec.t.Prompt = nil
	default:
		fillPark(p, found)
		a.logf("adopted the daemon's park on %s (%s)", p.PromptID, p.Kind)
	}
	return nil
}

// fillPark completes p from its pending_prompt item: the worker's
// questions (for an approval one, naming the subject and the grant key).
// Only a prompt of kind approval is about a call; any other kind (the
// worker's ask_user_question, or text, a question with no options) is
// answered as a question, as the worker answers it.
func fillPark(p *envelope.Prompt, it *blobhub.Item) {
	var m struct {
		Prompt struct {
			Kind      string `json:"kind"`
			Questions []struct {
				Question string `json:"question"`
				Header   string `json:"header"`
				Subject  string `json:"subject"`
				GrantKey string `json:"grant_key"`
				Options  []struct {
					Label       string `json:"label"`
					Description string `json:"description"`
				} `json:"options"`
				MultiSelect bool `json:"multiSelect"`
			} `json:"questions"`
		} `json:"prompt"`
	}
	_ = json.Unmarshal(it.Metadata, &m)
	p.ItemID, p.CreatedAt = it.ID, it.CreatedAt
	if p.Kind == "" {
		p.Kind = m.Prompt.Kind
	}
	c := policy.Call{Kind: p.Kind, Tool: p.Subject, Subject: p.Subject}
	for _, q := range m.Prompt.Questions {
		pq := policy.Question{Question: q.Question, Header: q.Header, MultiSelect: q.MultiSelect}
		for _, o := range q.Options {
			pq.Options = append(pq.Options, policy.Option{Label: o.Label, Description: o.Description})
		}
		c.Questions = append(c.Questions, pq)
	}
	if p.Kind == policy.KindApproval && len(m.Prompt.Questions) > 0 {
		q := m.Prompt.Questions[0]
		if c.Tool == "" {
			c.Tool = q.Subject
		}
		p.GrantKey, c.GrantKey, c.Subject = q.GrantKey, q.GrantKey, c.Tool
		if _, detail, ok := strings.Cut(q.GrantKey, ":"); ok {
			c.Target.Command = detail
		}
		c.Questions = nil
	}
	p.Subject, p.Call = c.Tool, c
}

// grantSubject is what blobhub-worker names a call by in its question and
// grant: the adapter's Subject, else the tool.
func grantSubject(c policy.Call) string {
	if c.Subject != "" {
		return c.Subject
	}
	return c.Tool
}

// grantKey is what blobhub-worker matches a one-shot grant on: the
// adapter's GrantKey; for a call the adapter names by a Subject of its own
// and no key, none; else the tool, a colon and what the call acts on (its
// command, else its file, else its path), or the tool alone when the
// input names none.
func grantKey(c policy.Call) string {
	switch {
	case c.GrantKey != "":
		return c.GrantKey
	case c.Subject != "":
		return ""
	}
	if d := callDetail(c); d != "" {
		return c.Tool + ":" + d
	}
	return c.Tool
}

// promptGrantKey is the grant key of a prompt: the one its item showed
// (a park the daemon left), else the call's.
func promptGrantKey(p *envelope.Prompt) string {
	if p.GrantKey != "" {
		return p.GrantKey
	}
	return grantKey(promptCall(p))
}

// cdThen is the one widened form a grant covers, as the worker's does: a
// cd into a folder, &&, then exactly the approved command. A resumed agent
// has lost its shell, so it goes back to where it ran first. The folder
// is one token (quoted whole, or with no separator in it).
var cdThen = regexp.MustCompile(`^cd\s+("[^"]+"|'[^']+'|[^\s;|&]+)\s+&&\s+(.+)$`)

// safeFolder is what that folder may be spelled with: a plain path, no
// expansion a shell would make (~, $, backticks, backslashes).
var safeFolder = regexp.MustCompile(`^[A-Za-z0-9._/ -]+$`)

// grantCovers reports whether a grant keyed stored covers a call keyed
// requested: the same key, or `<tool>:cd <dir> && <the approved command>`
// with dir inside the work folder (links resolved).
func grantCovers(stored, requested, workFolder string) bool {
	if stored == requested {
		return true
	}
	sTool, sCmd, ok1 := strings.Cut(stored, ":")
	rTool, rCmd, ok2 := strings.Cut(requested, ":")
	if !ok1 || !ok2 || sCmd == "" || sTool != rTool || workFolder == "" {
		return false
	}
	m := cdThen.FindStringSubmatch(rCmd)
	if m == nil || m[2] != sCmd {
		return false
	}
	dir := strings.Trim(m[1], `"'`)
	if dir == "" || strings.HasPrefix(dir, "-") || !safeFolder.MatchString(dir) {
		return false
	}
	base, err := filepath.EvalSymlinks(workFolder)
	if err != nil {
		return false
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(base, dir)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return false
	}
	rel, err := filepath.Rel(base, real)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// recordGrant leaves the worker's one-shot grant for an approved prompt,
// so whichever of the daemon and bhw-run resumes the thread runs the
// approved call without asking again.
func recordGrant(t *envelope.Thread, p *envelope.Prompt) {
	subject := p.Subject
	if subject == "" {
		subject = grantSubject(p.Call)
	}
	if subject == "" {
		return
	}
	t.Agent.Grant = &envelope.Grant{Subject: subject, Verdict: envelope.GrantApprove, GrantedBy: p.PromptID, GrantKey: promptGrantKey(p)}
}

// takeGrant spends the worker's grant when it covers c: its subject is
// c's, and its key covers c's. A grant with no key (the worker's for a
// question that named no call: a Codex file change or permissions
// request) covers the next call of its subject that names no call either,
// as the worker spends it: the re-attempt raises the same request, which
// carries nothing more to match. A grant with no key is not spent on a
// call that names one (an older worker's grant, which the worker spends on
// the subject alone): the person is asked again. Called with a.rec.mu held;
// the caller saves.
func (a *activation) takeGrant(c policy.Call) (*envelope.Grant, bool) {
	g := a.rec.t.Agent.Grant
	if g == nil || g.Verdict != envelope.GrantApprove || g.Subject == "" || g.Subject != grantSubject(c) {
		return nil, false
	}
	key := grantKey(c)
	if g.GrantKey == "" && key != "" || g.GrantKey != "" && (key == "" || !grantCovers(g.GrantKey, key, a.rec.t.Workspace.Folder())) {
		return nil, false
	}
	a.rec.t.Agent.Grant = nil
	return g, true
}

// grantedItem is the approval_granted item of a call a grant let through.
func grantedItem(g *envelope.Grant, c policy.Call) agent.Item {
	return agent.Item{
		Brief: fmt.Sprintf("✓ Auto-approved `%s`: a person's earlier answer approved this call", g.Subject),
		Meta: map[string]any{"type": itemApprovalGranted, "subject": g.Subject, "granted_by": g.GrantedBy,
			"call": agent.CallMeta(c)},
	}
}
