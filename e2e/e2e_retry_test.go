//go:build realcli

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/claude/claudetest"
	"github.com/blobhub/bhw-run/run"
)

// TestE2EClaudeTransientErrorResumed: a turn the API cuts off with a 500
// is resumed in the same run and agent session, as blobhub-worker resumes
// it: one retrying status item, then the resumed attempt completes the
// turn; the person's message reaches the model once, and the thread has
// one turn_end, completed.
func TestE2EClaudeTransientErrorResumed(t *testing.T) {
	e := newClaudeE2E(t, claudetest.Error(500), claudetest.Text("RECOVERED"))
	const alias = "retry/once"
	e.handOff(alias, claudeType, "approval", "FIRST-MESSAGE")
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	items := e.items(alias)
	var retrying []string
	for _, it := range items {
		if m := meta(t, it); m.Type == "status" {
			if m.Status != "retrying" {
				t.Errorf("a status item %q besides the retrying one", m.Status)
			}
			retrying = append(retrying, it.Content[0].Text)
		}
	}
	if len(retrying) != 1 || !strings.Contains(retrying[0], "attempt 1/3") {
		t.Errorf("retrying items %q, want one for attempt 1/3", retrying)
	}
	ends := e.itemsOfType(alias, "turn_end")
	if len(ends) != 1 || meta(t, ends[0]).Status != "completed" {
		t.Fatalf("turn_end items %v, want one completed: %v", len(ends), e.itemTypes(alias))
	}
	body := string(e.lastRequest().Body)
	if strings.Count(body, "FIRST-MESSAGE") != 1 || !strings.Contains(body, "temporary API error") {
		t.Errorf("the resumed request does not continue the session with the resume note:\n%s", tail(body, 3000))
	}
}

// TestE2EClaudeTransientErrorBoundedByMaxDuration: a resume whose wait
// would outlast --max-duration is not made: the turn fails at once.
func TestE2EClaudeTransientErrorBoundedByMaxDuration(t *testing.T) {
	e := newClaudeE2E(t, claudetest.Error(500), claudetest.Text("NEVER"))
	e.Env = append(e.Env, run.RetryDelaysEnv+"=600000")
	const alias = "retry/bounded"
	e.handOff(alias, claudeType, "approval", "hello")
	start := time.Now()
	code, out, stderr := e.run("--json", "--max-duration", "30s", alias)
	if s := parseSummary(t, out); code != 3 || s.Outcome != run.OutcomeTurnFailed {
		t.Fatalf("exit %d outcome %q, want 3 turn_failed\n%s", code, s.Outcome, stderr)
	}
	if d := time.Since(start); d > 25*time.Second {
		t.Errorf("the run took %v: it waited for a resume --max-duration does not leave time for", d)
	}
	if n := len(e.model.Requests()); n != 1 {
		t.Errorf("%d model requests, want 1", n)
	}
}

// TestE2EClaudeTurnRetriesFromConfig: config.yaml's
// agents.claude_code.turn_retries is the number of resumes, as
// blobhub-worker reads it: with 1, a model that answers 500 twice gets the
// turn and one resume (one retrying item, "attempt 1/1"), and the turn
// fails; with 0, the first 500 fails the turn, nothing resumed.
func TestE2EClaudeTurnRetriesFromConfig(t *testing.T) {
	for _, retries := range []int{1, 0} {
		t.Run(fmt.Sprint(retries), func(t *testing.T) {
			e := newClaudeE2E(t, claudetest.Error(500), claudetest.Error(500), claudetest.Text("NEVER"))
			e.agentConfig(claudeType).TurnRetries = &retries
			e.writeConfig()
			alias := fmt.Sprintf("retry/config-%d", retries)
			e.handOff(alias, claudeType, "approval", "hello")
			e.activate(alias, 3, run.OutcomeTurnFailed)
			var retrying []string
			for _, it := range e.items(alias) {
				if m := meta(t, it); m.Type == "status" && m.Status == "retrying" {
					retrying = append(retrying, it.Content[0].Text)
				}
			}
			if len(retrying) != retries || retries == 1 && !strings.Contains(retrying[0], "attempt 1/1") {
				t.Errorf("retrying items %q, want %d (attempt 1/1)", retrying, retries)
			}
			if n := len(e.model.Requests()); n != retries+1 {
				t.Errorf("%d model requests, want %d (the turn and %d resumes)", n, retries+1, retries)
			}
			if ends := e.itemsOfType(alias, "turn_end"); len(ends) != 1 || meta(t, ends[0]).Outcome != "failed" {
				t.Errorf("turn_end items %v, want one failed", e.itemTypes(alias))
			}
		})
	}
}
