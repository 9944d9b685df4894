//go:build realcli

package e2e

import (
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/claude/claudetest"
	"github.com/blobhub/bhw-run/run"
)

// TestPeerHandOverDaemonParkToRun: the daemon asks a person about a Write
// and is stopped while it waits (its held wait becomes a park in
// thread.yaml's agent.park); bhw-run, on the same tree, adopts the park:
// the person's yes answers the daemon's prompt (matched by its
// prompt_id), the repeated Write runs under the grant the answer leaves
// (one approval_granted, nobody asked again), and the prompt is resolved
// once. Started again, the daemon finds nothing open: it answers the next
// message in the same agent session without asking or resolving
// anything a second time.
func TestPeerHandOverDaemonParkToRun(t *testing.T) {
	e, worker := newPeerE2E(t, 2)
	const alias = "peer/daemon-parks"
	x := e.handOffWrite(alias)

	d := e.startDaemon(worker)
	e.waitItems(d, alias, "a pending_prompt", func(items []blobhub.Item) bool { return countType(t, items, "pending_prompt") == 1 })
	e.stopDaemon(d)
	fileAbsent(t, x)
	prompt := meta(t, e.itemsOfType(alias, "pending_prompt")[0]).Prompt
	th := e.threadYAML(alias)
	if th.Prompt == nil || th.Prompt.PromptID != prompt["prompt_id"] {
		t.Fatalf("the daemon's thread.yaml parks on %+v; its pending_prompt is %v", th.Prompt, prompt)
	}
	session := th.Agent.AgentSessionID

	// Waiting on the person, the thread is not runnable; answered, it is.
	if _, out, _ := e.run("ls", "--runnable"); strings.Contains(out, alias) {
		t.Errorf("ls --runnable lists the parked thread before its answer: %q", out)
	}
	e.post(alias, "yes")
	if _, out, _ := e.run("ls", "--runnable"); !strings.Contains(out, alias) {
		t.Errorf("ls --runnable does not list the answered thread: %q", out)
	}
	e.model.Push(writeTool(x, "approved content"), claudetest.Text("WRITTEN"))
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	fileIs(t, x, "approved content")
	if m := meta(t, e.onlyOfType(alias, "pending_prompt_resolved")).Prompt; m["prompt_id"] != prompt["prompt_id"] || m["prompt_state"] != "answered" {
		t.Errorf("bhw-run resolved %v; the daemon's prompt was %v", m, prompt)
	}
	items := e.items(alias)
	if n := countType(t, items, "approval_granted"); n != 1 {
		t.Errorf("%d approval_granted items, want 1 (the repeated Write ran on the person's yes): %v", n, e.itemTypes(alias))
	}
	if n := countType(t, items, "pending_prompt"); n != 1 {
		t.Errorf("%d pending_prompt items, want the daemon's only: %v", n, e.itemTypes(alias))
	}
	th = e.threadYAML(alias)
	if th.Prompt != nil || th.Agent.Grant != nil || th.Agent.AgentSessionID != session {
		t.Errorf("after bhw-run: prompt %+v grant %+v session %q (the daemon's %q)", th.Prompt, th.Agent.Grant, th.Agent.AgentSessionID, session)
	}
	if body := string(e.lastRequest().Body); strings.Count(body, "write x.txt") != 1 {
		t.Errorf("the first message was delivered again:\n%s", tail(body, 4000))
	}

	turnEnds := countType(t, items, "turn_end")
	e.model.Push(claudetest.Text("DAEMON-AGAIN"))
	e.post(alias, "THIRD-MESSAGE")
	d = e.startDaemon(worker)
	items = e.waitItems(d, alias, "a turn_end after bhw-run's", func(items []blobhub.Item) bool { return countType(t, items, "turn_end") > turnEnds })
	e.stopDaemon(d)
	if n := countType(t, items, "pending_prompt"); n != 1 {
		t.Errorf("%d pending_prompt items after the daemon's turn, want 1: %v", n, e.itemTypes(alias))
	}
	if n := countType(t, items, "pending_prompt_resolved"); n != 1 {
		t.Errorf("%d pending_prompt_resolved items after the daemon's turn, want 1: %v", n, e.itemTypes(alias))
	}
	body := string(e.lastRequest().Body)
	if strings.Count(body, "THIRD-MESSAGE") != 1 || strings.Count(body, "write x.txt") != 1 {
		t.Errorf("the daemon's request does not continue the conversation with the third message once:\n%s", tail(body, 4000))
	}
	if th := e.threadYAML(alias); th.Prompt != nil || th.Agent.AgentSessionID != session {
		t.Errorf("after the daemon: prompt %+v, session %q (was %q)", th.Prompt, th.Agent.AgentSessionID, session)
	}
}
