//go:build realcli

package acp

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/acp/acptest"
	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/confine"
	"github.com/blobhub/bhw-run/policy"
)

// forEachAgent runs f for each pinned agent, in parallel: most of the time
// is the agents' (and Gemini CLI's wait for the minute to turn).
func forEachAgent(t *testing.T, f func(t *testing.T, a *acptest.Agent)) {
	for _, a := range acptest.Agents {
		t.Run(a.Type, func(t *testing.T) {
			t.Parallel()
			f(t, a)
		})
	}
}

// TestRealParkResumeGrant: a write and a command, each parked in a first
// process (the call does not run, the turn ends parked), then allowed once
// in a second process that loads the session: the re-issued call's
// request has the parked one's fingerprint and runs; the replay of the
// loaded session is not relayed.
func TestRealParkResumeGrant(t *testing.T) {
	forEachAgent(t, func(t *testing.T, a *acptest.Agent) {
		g := newRealRig(t, a)
		w := filepath.Join(g.work, "w.txt")
		for _, c := range []struct {
			name, marker, file string
			check              func(policy.Call) error
		}{
			{"write", a.Write(w, "parked write\n"), w, func(c policy.Call) error {
				if c.Effect != policy.EffectWrite || !slices.Contains(c.Target.Paths, w) {
					return fmt.Errorf("not a write of %s", w)
				}
				return nil
			}},
			{"shell", a.Shell("echo ran > s.txt"), filepath.Join(g.work, "s.txt"), func(c policy.Call) error {
				if c.Effect != policy.EffectExec || c.Target.Command != "echo ran > s.txt" || c.Target.Cwd != g.work {
					return fmt.Errorf("not the command in %s", g.work)
				}
				return nil
			}},
		} {
			t.Run(c.name, func(t *testing.T) {
				// Side by side: Gemini CLI's resume waits for the minute of
				// the session's creation to pass.
				t.Parallel()
				s1 := g.start(t, g.launch(t, "approval"))
				h1 := &agenttest.Recorder{}
				res := runTurn(t, s1, c.marker, h1)
				calls := h1.Calls()
				if res.Outcome != agent.TurnParked || len(calls) != 1 {
					t.Fatalf("first turn %+v, %d calls; items %s", res, len(calls), types(h1))
				}
				parked := calls[0]
				if err := c.check(parked); err != nil || parked.Fingerprint == "" {
					t.Fatalf("parked call %+v: %v", parked, err)
				}
				if exists(c.file) {
					t.Fatal("the parked call ran")
				}
				results := h1.OfType(agent.ItemToolResult)
				if _, parked := agent.IsParkedResult(results[0]); len(results) != 1 || !parked {
					t.Fatalf("items %s, results %v", types(h1), results)
				}
				id := s1.SessionID()
				closeNow(t, s1)

				l := g.launch(t, "approval")
				l.SessionID, l.Resume = id, true
				s2 := g.start(t, l)
				h2 := &agenttest.Recorder{Gate: func(c policy.Call) policy.Verdict {
					if c.Fingerprint == parked.Fingerprint {
						return policy.Verdict{Action: policy.Allow}
					}
					t.Errorf("the re-issued call %+v does not match the parked %+v", c, parked)
					return policy.Verdict{Action: policy.Deny}
				}}
				res = runTurn(t, s2, "A person approved your call. Run it again now, unchanged.", h2)
				if res.Outcome != agent.TurnCompleted || len(h2.Calls()) != 1 || s2.SessionID() != id {
					t.Fatalf("resumed turn %+v, %d calls, session %s; items %s", res, len(h2.Calls()), s2.SessionID(), types(h2))
				}
				if !exists(c.file) {
					t.Fatal("the approved call did not run")
				}
				// Only this turn's items: one call, its result, the text.
				tt := h2.Types()
				if slices.Contains(tt, agent.ItemThinking) || tt[0] != agent.ItemToolCall || tt[len(tt)-1] != agent.ItemText ||
					len(h2.OfType(agent.ItemToolCall)) != 1 {
					t.Fatalf("resumed turn's items %s (the replay was relayed?)", strings.Join(tt, " "))
				}
				t.Logf("items %s, usage %+v", strings.Join(tt, " "), res.Usage)
				closeNow(t, s2)
			})
		}
	})
}

// TestRealVersion: `bhw-run doctor` asks each CLI its version; the answer
// is the pinned version, and the user's home is left as it was (the CLIs
// make their folders at every start, --version included).
func TestRealVersion(t *testing.T) {
	forEachAgent(t, func(t *testing.T, a *acptest.Agent) {
		bin := a.Bin(t)
		userHome := t.TempDir()
		l := agent.Launch{Executable: bin, WorkFolder: t.TempDir(),
			Env: []string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "HOME=" + userHome}}
		if a == acptest.Copilot {
			l.Options = CopilotOptions{CacheDir: acptest.CopilotCache(t, bin)}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		v, err := Adapter(a.Type).Version(ctx, l)
		if err != nil || !strings.Contains(v, a.Version) {
			t.Fatalf("version %q, %v; want one naming %s", v, err, a.Version)
		}
		// Confined, as doctor asks it: its home made in the private
		// TMPDIR, the only folder besides the work folder it may write.
		if confine.ABI() > 0 {
			temp := t.TempDir()
			rules, err := confine.Build(confine.Spec{WorkFolder: l.WorkFolder, Temp: temp, Deny: []string{userHome}})
			if err != nil {
				t.Fatal(err)
			}
			cl := l
			cl.Confine, cl.Env = &rules, append(slices.Clone(l.Env), "TMPDIR="+temp)
			if v, err := Adapter(a.Type).Version(ctx, cl); err != nil || !strings.Contains(v, a.Version) {
				t.Fatalf("confined: version %q, %v; want one naming %s", v, err, a.Version)
			}
		}
		if left, _ := os.ReadDir(userHome); len(left) > 0 {
			var names []string
			for _, e := range left {
				names = append(names, e.Name())
			}
			t.Errorf("--version wrote into the user's home: %v", names)
		}
	})
}
