package run

import (
	"sync"

	"github.com/blobhub/bhw-run/blobhub"
)

// Observer watches a run as it goes, for a live display: main's terminal
// status line implements it; run knows nothing of terminals. run calls it
// on the goroutines that relay the agent, while they relay, so every
// method must return at once (keep the value and draw it elsewhere): an
// observer that blocks would slow the relay down.
type Observer interface {
	// Progress is called each time what the run waits on, or the count of
	// items posted, changes.
	Progress(Progress)
	// Posted is called once for each item BlobHub confirmed, in order, with
	// the item as posted (its id and created_at the server's). target is
	// the thread it went to: the run's alias, or "worker".
	Posted(target string, it blobhub.Item)
}

// Stage is what a run waits on while its agent works.
type Stage string

// Stages of a turn, in the order they usually come.
const (
	StageStarting  Stage = "starting the agent"
	StageModel     Stage = "waiting on the model"
	StageTool      Stage = "waiting on a tool"
	StageGate      Stage = "checking a call"
	StageFinishing Stage = "finishing the turn"
)

// Progress is the run's progress as the observer sees it.
type Progress struct {
	// Stage is empty until the run starts an agent.
	Stage Stage
	// Tool is the open tool call's brief ("Bash → go test ./...") while
	// Stage is StageTool.
	Tool        string
	ItemsPosted int
}

// progress is the run side of the Observer: the current Progress and the
// open tool calls in the order they opened.
type progress struct {
	obs  Observer
	mu   sync.Mutex
	p    Progress
	open []openCall
	gate bool
}

type openCall struct{ id, brief string }

// update changes the progress under its lock and tells the observer;
// without an observer it does nothing.
func (g *progress) update(fn func(*progress)) {
	if g == nil || g.obs == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	fn(g)
	g.settle()
	g.obs.Progress(g.p)
}

// settle derives the stage from the open calls once the agent runs: the
// gate while it decides, else the newest open call, else the model.
func (g *progress) settle() {
	switch g.p.Stage {
	case "", StageStarting, StageFinishing:
		return
	}
	switch {
	case g.gate:
		g.p.Stage, g.p.Tool = StageGate, ""
	case len(g.open) > 0:
		g.p.Stage, g.p.Tool = StageTool, g.open[len(g.open)-1].brief
	default:
		g.p.Stage, g.p.Tool = StageModel, ""
	}
}

func (g *progress) stage(s Stage) {
	g.update(func(g *progress) {
		g.p.Stage = s
		if s != StageModel {
			g.open, g.gate, g.p.Tool = nil, false, ""
		}
	})
}

func (g *progress) callOpened(id, brief string) {
	g.update(func(g *progress) { g.open = append(g.open, openCall{id, brief}) })
}

func (g *progress) callClosed(id string) {
	g.update(func(g *progress) {
		for i, c := range g.open {
			if c.id == id {
				g.open = append(g.open[:i:i], g.open[i+1:]...)
				break
			}
		}
	})
}

func (g *progress) deciding(on bool) { g.update(func(g *progress) { g.gate = on }) }

// watched reports whether an observer listens.
func (g *progress) watched() bool { return g != nil && g.obs != nil }

// posted counts a confirmed item and hands it to the observer.
func (g *progress) posted(target string, it blobhub.Item) {
	if g == nil || g.obs == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.p.ItemsPosted++
	g.obs.Posted(target, it)
	g.obs.Progress(g.p)
}
