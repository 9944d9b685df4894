package run

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/blobhub"
)

// recorder is an Observer that keeps what it is told.
type recorder struct {
	mu       sync.Mutex
	progress []Progress
	posted   []string // target: metadata.type
}

func (r *recorder) Progress(p Progress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.progress); n == 0 || r.progress[n-1] != p {
		r.progress = append(r.progress, p)
	}
}

func (r *recorder) Posted(target string, it blobhub.Item) {
	var m struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(it.Metadata, &m)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.posted = append(r.posted, target+": "+m.Type)
}

// stages is the recorded stages, each with its open call, repeats folded.
func (r *recorder) stages() []string {
	var out []string
	for _, p := range r.progress {
		s := string(p.Stage)
		if p.Tool != "" {
			s += " (" + p.Tool + ")"
		}
		if len(out) == 0 || out[len(out)-1] != s {
			out = append(out, s)
		}
	}
	return out
}

// TestObserverFollowsTheTurn: the observer hears the stages of a turn in
// order — the agent starting, the model, a tool call while it is open, the
// gate deciding a call, the end — and every item posted, counted, with the
// same count as the summary.
func TestObserverFollowsTheTurn(t *testing.T) {
	h := newHarness(t, false)
	rec := &recorder{}
	h.runner = func(r *Runner) { r.Observer = rec }
	const alias = "obs/t1"
	h.handOff(alias, "autonomous", "work please")
	h.play(agenttest.Turn(
		agenttest.Step{Text: "looking"},
		agenttest.Step{Tool: agenttest.Exec("go test ./...")},
		agenttest.Step{Call: agenttest.Exec("make lint")},
		agenttest.Step{Text: "done"},
	))
	sum := h.run(alias)
	want(t, sum, OutcomeTurnCompleted, 0)

	wantStages := []string{
		string(StageStarting), string(StageModel),
		string(StageTool) + " (shell)", string(StageModel),
		string(StageTool) + " (shell)", string(StageGate), string(StageTool) + " (shell)", string(StageModel),
		string(StageFinishing),
	}
	if got := rec.stages(); !slices.Equal(got, wantStages) {
		t.Errorf("stages\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantStages, "\n"))
	}
	last := rec.progress[len(rec.progress)-1]
	if last.ItemsPosted != sum.ItemsPosted || sum.ItemsPosted != len(rec.posted) {
		t.Errorf("the observer counted %d items (told of %d), the summary %d", last.ItemsPosted, len(rec.posted), sum.ItemsPosted)
	}
	wantPosted := []string{alias + ": text", alias + ": tool_call", alias + ": tool_result", alias + ": tool_call", alias + ": tool_result", alias + ": text", alias + ": turn_end"}
	if !slices.Equal(rec.posted, wantPosted) {
		t.Errorf("posted %v, want %v", rec.posted, wantPosted)
	}

	// An idle run starts no agent: the observer hears nothing.
	idle := &recorder{}
	h.runner = func(r *Runner) { r.Observer = idle }
	want(t, h.run(alias), OutcomeIdle, 0)
	if len(idle.progress)+len(idle.posted) != 0 {
		t.Errorf("an idle run told the observer %v %v", idle.progress, idle.posted)
	}
}
