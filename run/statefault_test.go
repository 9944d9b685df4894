package run

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/setup"
)

// fullDisk makes every write of the state file named base fail with
// ENOSPC, as a full disk does, until the test ends.
func fullDisk(t *testing.T, base string) {
	t.Helper()
	setup.TestHookStateWrite = func(path string) error {
		if filepath.Base(path) == base {
			return syscall.ENOSPC
		}
		return nil
	}
	t.Cleanup(func() { setup.TestHookStateWrite = nil })
}

// wantStateInvalid checks a run ended STATE_INVALID (78), never the 75 of
// "try later" every recipe maps to success, with a message naming the file
// and what went wrong.
func wantStateInvalid(t *testing.T, sum *Summary, file, cause string) {
	t.Helper()
	wantCode(t, sum, exit.Config, exit.CodeStateTreeInvalid)
	if !strings.Contains(sum.Error.Message, file) || !strings.Contains(sum.Error.Message, cause) {
		t.Errorf("message %q does not name %s and %q", sum.Error.Message, file, cause)
	}
}

// TestFullDisk: a state file that cannot be written (ENOSPC, through the
// write hook) ends the run STATE_INVALID (78) wherever it happens — the
// ENOSPC of a journal record in the middle of a turn used to lose the item
// and end the run 0, of section.yaml or identity.yaml to end it INTERNAL.
// The turn it stops is resumed once the disk has room, its message
// delivered again.
func TestFullDisk(t *testing.T) {
	const nospace = "no space left on device"
	for _, file := range []string{"thread.yaml", "section.yaml", "identity.yaml"} {
		t.Run(file, func(t *testing.T) {
			h := newHarness(t, false)
			const alias = "disk/full"
			h.handOff(alias, "approval", "hello")
			fullDisk(t, file)
			wantStateInvalid(t, h.run(alias), file, nospace)
		})
	}
	t.Run("the journal mid-turn", func(t *testing.T) {
		h := newHarness(t, false)
		const alias = "disk/journal"
		h.handOff(alias, "approval", "")
		want(t, h.run(alias), OutcomeIdle, exit.OK) // activated, nothing to say
		h.srv.PersonPost(alias, "please work")
		h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "lost?"}, {WaitInterrupt: true}}}})
		fullDisk(t, "emissions.jsonl")
		wantStateInvalid(t, h.run(alias), "emissions.jsonl", nospace)
		th := h.thread(alias)
		if th.Turn.State != envelope.TurnStateInterrupted || len(th.Turn.InboundIDs) != 1 {
			t.Fatalf("turn %+v, want interrupted with the message, for the next run to resume", th.Turn)
		}
		setup.TestHookStateWrite = nil
		h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "done now"}}}})
		want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
		if got := h.items(alias); !strings.Contains(strings.Join(got, ","), "text") {
			t.Errorf("items %v", got)
		}
		h.noneTwice(alias)
	})
}

// TestDirectoryAtThreadLock: a folder where thread.lock belongs is
// STATE_INVALID, naming it, not "try later".
func TestDirectoryAtThreadLock(t *testing.T) {
	h := newHarness(t, false)
	const alias = "disk/lockdir"
	h.handOff(alias, "approval", "hello")
	path := filepath.Join(setup.ThreadDir(h.setup().JobDir, alias), "thread.lock")
	if err := os.MkdirAll(path, 0o700); err != nil {
		t.Fatal(err)
	}
	wantStateInvalid(t, h.run(alias), path, "is a directory")
}
