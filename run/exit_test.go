package run

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/setup"
)

// TestStateInvalidOnSaveIs78: a thread.yaml that can no longer be written
// mid-turn ends the run STATE_INVALID with 78, as when it cannot be read
// (it used to be 75, "try again later", which a retry never mends).
func TestStateInvalidOnSaveIs78(t *testing.T) {
	h := newHarness(t, false)
	const alias = "unwritable/t"
	h.handOff(alias, "approval", "start")
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "working"}, {Text: "done"}}}})
	path := filepath.Join(setup.ThreadDir(h.setup().JobDir, alias), "thread.yaml")
	h.tune = func(r *Runner) {
		// Once the turn runs, thread.yaml becomes a folder the atomic write
		// cannot rename over.
		r.Client = &onText{Client: r.Client, do: func() {
			if err := os.Remove(path); err != nil {
				t.Error(err)
			}
			if err := os.MkdirAll(filepath.Join(path, "in-the-way"), 0o700); err != nil {
				t.Error(err)
			}
		}}
	}
	sum := h.run(alias)
	wantCode(t, sum, exit.Config, exit.CodeStateTreeInvalid)
	if !strings.Contains(sum.Error.Message, "thread.yaml") {
		t.Fatalf("message %q", sum.Error.Message)
	}
}

// onText calls do once, right after the first text item is posted.
type onText struct {
	blobhub.Client
	once sync.Once
	do   func()
}

func (c *onText) Post(ctx context.Context, alias string, p blobhub.NewItem) (blobhub.Item, error) {
	it, err := c.Client.Post(ctx, alias, p)
	if err == nil && metaType(p) == agent.ItemText {
		c.once.Do(c.do)
	}
	return it, err
}

// TestLockFailureIsNotContention: a thread lock that cannot be taken for
// another reason than a holder (here thread.lock is a folder) is
// STATE_INVALID 78, not THREAD_LOCKED 75 "retry later".
func TestLockFailureIsNotContention(t *testing.T) {
	h := newHarness(t, false)
	const alias = "lockdir/t"
	h.handOff(alias, "approval", "start")
	if err := os.MkdirAll(filepath.Join(setup.ThreadDir(h.setup().JobDir, alias), "thread.lock"), 0o700); err != nil {
		t.Fatal(err)
	}
	sum := h.run(alias)
	wantCode(t, sum, exit.Config, exit.CodeStateTreeInvalid)
	if strings.Contains(sum.Error.Message, "retry later") || !strings.Contains(sum.Error.Message, "cannot lock") {
		t.Fatalf("message %q", sum.Error.Message)
	}
}
