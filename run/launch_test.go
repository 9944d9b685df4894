package run

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/setup"
)

// TestDoctorChecksTheLaunchARunStarts: doctor checks an agent through the
// launch a run starts for a thread that asks nothing of its own — the
// same executable, environment, model, effort, posture, arguments, home,
// options and cache — not a copy of it built by hand that could drift.
// What belongs to one start alone (the work folder, the session, the
// confinement's private TMPDIR) is left out.
func TestDoctorChecksTheLaunchARunStarts(t *testing.T) {
	h := newHarness(t, false)
	const alias = "launch/once"
	h.handOff(alias, "approval", "start")
	h.play(agenttest.Turn(agenttest.Step{Text: "hi"}))
	var started agent.Launch
	h.runner = func(r *Runner) {
		r.Environ = nil // bhw-run's own, as doctor's
		wrapStart(r, testAgent, func(next startFunc) startFunc {
			return func(ctx context.Context, l agent.Launch) (agent.Session, error) {
				started = l
				return next(ctx, l)
			}
		})
	}
	want(t, h.run(alias), OutcomeTurnCompleted, 0)

	var checked *agent.Launch
	ads := testAdapters()
	ads[0].LoginCheck = func(l agent.Launch) (bool, string) {
		checked = &l
		return true, "logged in"
	}
	for i := range ads {
		// Not the test binary's --version: only the launch is compared.
		ads[i].Version = func(context.Context, agent.Launch) (string, error) { return "test", nil }
	}
	Doctor(context.Background(), setup.Options{APIURL: h.srv.URL(), APIKey: bhtest.RunnerKey, StateDir: h.state, ConfigPath: h.config,
		RevisionID: bhtest.RevisionID, SessionID: bhtest.SessionID, Home: h.state, Adapters: ads})
	if checked == nil {
		t.Fatal("doctor did not check the login of " + testAgent)
	}
	if started.Executable == "" {
		t.Fatal("the run started no agent")
	}
	noTemp := func(env []string) []string {
		return slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, "TMPDIR=") })
	}
	for _, f := range []struct {
		name      string
		run, doct any
	}{
		{"executable", started.Executable, checked.Executable},
		{"env", strings.Join(noTemp(started.Env), "\n"), strings.Join(noTemp(checked.Env), "\n")},
		{"model", started.Model, checked.Model},
		{"effort", started.Effort, checked.Effort},
		{"permissions", started.Permissions, checked.Permissions},
		{"extra args", strings.Join(started.ExtraArgs, " "), strings.Join(checked.ExtraArgs, " ")},
		{"home", started.Home, checked.Home},
		{"cache", started.CacheDir, checked.CacheDir},
	} {
		if f.run != f.doct {
			t.Errorf("%s: the run started %q, doctor checked %q", f.name, f.run, f.doct)
		}
	}
}
