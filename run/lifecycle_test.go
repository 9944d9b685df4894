package run

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/policy"
)

// TestLifecycle drives one thread through pending → active → several turns
// → parked → answered → completed, on the HTTP API and on the local store.
func TestLifecycle(t *testing.T) {
	for _, local := range []bool{false, true} {
		name := "http"
		if local {
			name = "file"
		}
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, local)
			target := filepath.Join(h.work, "x.txt")
			write := &agenttest.Tool{Effect: policy.EffectWrite, Target: policy.Target{Paths: []string{target}}, Result: "File created"}
			// Each run starts a new agent process, which plays its first turn.
			turn := func(steps ...agenttest.Step) {
				h.play(agenttest.Script{Turns: [][]agenttest.Step{steps}})
			}
			const alias = "projects/p1/t1"
			h.handOff(alias, "approval", "please start")
			turn(agenttest.Step{Text: "hello"}, agenttest.Step{Tool: &agenttest.Tool{Effect: policy.EffectRead, Target: policy.Target{Paths: []string{target}}, Result: "nothing"}})

			want(t, h.run(alias), OutcomeTurnCompleted, 0)
			if got := h.wireState(alias); got != "active" {
				t.Fatalf("wire state %q, want active", got)
			}
			if got := h.items(alias); !slices.Equal(got, []string{"person", "text", "tool_call", "tool_result", "turn_end"}) {
				t.Fatalf("items %v", got)
			}
			// Nothing new: idle.
			want(t, h.run(alias), OutcomeIdle, 0)

			h.srv.PersonPost(alias, "go on")
			turn(agenttest.Step{Text: "second turn"})
			want(t, h.run(alias), OutcomeTurnCompleted, 0)

			h.srv.PersonPost(alias, "write x.txt")
			turn(agenttest.Step{Call: write})
			want(t, h.run(alias), OutcomeParked, 0)
			if _, err := os.Stat(target); err == nil {
				t.Fatal("the parked call ran")
			}
			if h.thread(alias).Prompt == nil {
				t.Fatal("no prompt recorded")
			}
			// No answer: stays parked without starting the agent.
			want(t, h.run(alias), OutcomeParked, 0)

			h.srv.PersonPost(alias, "yes")
			turn(agenttest.Step{Call: write}, agenttest.Step{Text: "written"})
			want(t, h.run(alias), OutcomeTurnCompleted, 0)
			got := h.items(alias)
			if n := count(got, "pending_prompt"); n != 1 {
				t.Fatalf("%d pending_prompt items, want 1: %v", n, got)
			}
			if n := count(got, "pending_prompt_resolved"); n != 1 {
				t.Fatalf("%d pending_prompt_resolved, want 1: %v", n, got)
			}
			if len(h.thread(alias).Grants) != 0 {
				t.Fatal("the grant was not consumed")
			}

			h.setWireState(alias, envelope.StateCompleted)
			want(t, h.run(alias), OutcomeStopped, 0)
			if st := h.thread(alias).Agent.State; st != "completed" {
				t.Fatalf("local state %q", st)
			}
			for _, it := range h.srv.Items(alias) {
				if strings.Contains(string(it.Metadata), "emission_id") && it.UserID == "usr_person" {
					t.Fatal("a runner item was posted as the person")
				}
			}
		})
	}
}

func count(s []string, v string) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

// stopBeforeSecondDownload is a client that lets a person stop the thread
// (instance.state completed) just before the run's second download of it
// under the lock: the read of the runner's read-modify-write of the
// envelope. (A first run reads the thread once more, before the lock, to
// learn whether to make the thread's folder.)
type stopBeforeSecondDownload struct {
	blobhub.Client
	h         *harness
	alias     string
	downloads int
}

func (c *stopBeforeSecondDownload) Download(ctx context.Context, alias string) (blobhub.Object, error) {
	if alias == c.alias {
		if c.downloads++; c.downloads == 3 {
			o, _ := c.h.srv.Get(alias)
			v, err := envelope.WithState(o.Value, envelope.StateCompleted)
			if err != nil {
				c.h.t.Fatal(err)
			}
			c.h.srv.Put(alias, string(v))
		}
	}
	return c.Client.Download(ctx, alias)
}

// TestFailedNotOverAPersonsWrite: a thread failing its checklist is not put
// to failed on the wire when a person changed instance.state after the run
// decided: the transition is abandoned and the next run decides.
func TestFailedNotOverAPersonsWrite(t *testing.T) {
	h := newHarness(t, false)
	const alias = "stopped/meanwhile"
	h.srv.Put(alias, envelopeWith(filepath.Join(h.work, "missing"), nil))
	h.runner = func(r *Runner) { r.Client = &stopBeforeSecondDownload{Client: r.Client, h: h, alias: alias} }
	sum := h.run(alias)
	if got := h.wireState(alias); got != envelope.StateCompleted {
		t.Fatalf("wire state %q after a person stopped the thread, want completed", got)
	}
	if sum.ExitCode != exit.TempFail {
		t.Fatalf("exit %d (%+v), want %d: the next run decides", sum.ExitCode, sum.Error, exit.TempFail)
	}
	h.runner = nil
	want(t, h.run(alias), OutcomeIdle, exit.OK)
	if got := h.wireState(alias); got != envelope.StateCompleted {
		t.Fatalf("wire state %q after the next run, want completed", got)
	}
}
