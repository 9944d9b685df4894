package run

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/setup"
)

// TestAgentEnvAllowlist: the agent gets the basics, its own prefixes and
// agents.<type>.env, its home under its HomeEnv; never BLOBHUB_*, and never
// another agent's prefixes.
func TestAgentEnvAllowlist(t *testing.T) {
	ad := agenttest.Agent{}.Adapter()
	r := &Runner{Environ: []string{"PATH=/bin", "HOME=/home/me", "LC_ALL=C", "HTTPS_PROXY=http://proxy",
		"AGENTTEST_MODE=fast", "ANTHROPIC_API_KEY=not-yours", "OPENAI_API_KEY=not-yours", "BLOBHUB_API_KEY=secret", "RANDOM=x"}}
	res := &resolved{adapter: &ad, Env: map[string]string{"EXTRA": "1", "BLOBHUB_TOKEN": "no"}}
	res.Home, res.AgentHome = "/home/me", "/home/me/agent-home"
	got := r.agentEnv(res)
	want := []string{"AGENTTEST_HOME=/home/me/agent-home", "AGENTTEST_MODE=fast", "EXTRA=1", "HOME=/home/me", "HTTPS_PROXY=http://proxy", "LC_ALL=C", "PATH=/bin"}
	if !slices.Equal(got, want) {
		t.Fatalf("env %q\nwant %q", got, want)
	}
}

// TestHostPicksTheSessionID: for an adapter whose host picks the session
// id, run hands a new id to Start as a new session and records it in
// thread.yaml before the first message goes out; the next turn resumes it.
func TestHostPicksTheSessionID(t *testing.T) {
	h := newHarness(t, false)
	const alias = "host/sid"
	h.handOffTo(alias, testHostAgent, "approval", "start")
	h.play(agenttest.Turn(agenttest.Step{Text: "hi"}))
	var launches []agent.Launch
	var recorded []string
	h.runner = func(r *Runner) {
		wrapStart(r, testHostAgent, func(next startFunc) startFunc {
			return func(ctx context.Context, l agent.Launch) (agent.Session, error) {
				launches = append(launches, l)
				sess, err := next(ctx, l)
				return recordAtTurn{sess, func() { recorded = append(recorded, h.thread(alias).Agent.AgentSessionID) }}, err
			}
		})
	}
	want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
	h.srv.PersonPost(alias, "more")
	want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
	if len(launches) != 2 {
		t.Fatalf("%d launches", len(launches))
	}
	first, second := launches[0], launches[1]
	if first.SessionID == "" || first.Resume || recorded[0] != first.SessionID {
		t.Fatalf("first launch session %q resume %v, thread.yaml had %q before the first message", first.SessionID, first.Resume, recorded[0])
	}
	if second.SessionID != first.SessionID || !second.Resume {
		t.Fatalf("second launch session %q resume %v, want %q resumed", second.SessionID, second.Resume, first.SessionID)
	}
}

// recordAtTurn is a session that calls at before each turn, when the
// message is about to go out.
type recordAtTurn struct {
	agent.Session
	at func()
}

func (s recordAtTurn) Turn(ctx context.Context, message string, h agent.Handler) (agent.TurnResult, error) {
	s.at()
	return s.Session.Turn(ctx, message, h)
}

// TestWorkFolderHoldsAnAgentHome: a work folder may not contain any
// adapter's home (from its HomeEnv, from agents.<type>.<HomeKey>) nor its
// folders under the user's home, whichever agent the thread names.
func TestWorkFolderHoldsAnAgentHome(t *testing.T) {
	for _, tc := range []struct {
		name, says string
		set        func(h *harness, work string)
	}{
		{"agents.<type>.home", "agents.test_host_agent.home", func(h *harness, work string) {
			h.editConfig("  "+testHostAgent+":\n", "  "+testHostAgent+":\n    home: "+filepath.Join(work, "agent-home")+"\n")
		}},
		{"the HomeEnv of bhw-run", "AGENTTEST_HOME", func(h *harness, work string) {
			t.Setenv("AGENTTEST_HOME", filepath.Join(work, "sub", "home"))
		}},
		{"a folder under the user's home", "~/.agenttest", func(h *harness, work string) {
			// The work folder is ~/.agenttest itself.
			h.runner = func(r *Runner) { r.Setup.Home = filepath.Dir(work) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, false)
			work := filepath.Join(t.TempDir(), ".agenttest")
			if err := os.MkdirAll(work, 0o700); err != nil {
				t.Fatal(err)
			}
			tc.set(h, work)
			const alias = "home/t"
			h.srv.Put(alias, string(envelope.NewThread(work, testAgent, "approval", alias)))
			h.srv.PersonPost(alias, "start")
			sum := h.run(alias)
			wantCode(t, sum, exit.Failed, exit.CodeWorkFolderNotAllowed)
			if !strings.Contains(sum.Error.Message, tc.says) {
				t.Fatalf("message %q does not name %s", sum.Error.Message, tc.says)
			}
		})
	}
}

// TestWorkFolderInsideAForbiddenFolder: a work folder inside the state
// tree, ~/.blobhub, an agent's home or the local store is refused like one
// that contains them (it used to pass: only "is or contains" was checked).
func TestWorkFolderInsideAForbiddenFolder(t *testing.T) {
	for _, tc := range []struct {
		name, says string
		local      bool
		work       func(h *harness) string // made under a forbidden folder
	}{
		{"the state tree", "the bhw-run state tree", false, func(h *harness) string {
			return filepath.Join(h.state, "jobs", "repo")
		}},
		{"~/.blobhub", "~/.blobhub", false, func(h *harness) string {
			home := t.TempDir()
			h.runner = func(r *Runner) { r.Setup.Home = home }
			return filepath.Join(home, ".blobhub", "repo")
		}},
		{"agents.<type>.home", "agents.test_host_agent.home", false, func(h *harness) string {
			home := t.TempDir()
			h.editConfig("  "+testHostAgent+":\n", "  "+testHostAgent+":\n    home: "+home+"\n")
			return filepath.Join(home, "projects", "repo")
		}},
		{"the HomeEnv of bhw-run", "AGENTTEST_HOME", false, func(h *harness) string {
			home := t.TempDir()
			t.Setenv("AGENTTEST_HOME", home)
			return filepath.Join(home, "repo")
		}},
		{"a folder under the user's home", "~/.agenttest", false, func(h *harness) string {
			home := t.TempDir()
			h.runner = func(r *Runner) { r.Setup.Home = home }
			return filepath.Join(home, ".agenttest", "repo")
		}},
		{"the local store", "the local store", true, func(h *harness) string {
			return filepath.Join(h.srv.Dir(), "repo")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.local)
			work := tc.work(h)
			if err := os.MkdirAll(work, 0o700); err != nil {
				t.Fatal(err)
			}
			const alias = "inside/t"
			h.srv.Put(alias, string(envelope.NewThread(work, testAgent, "approval", alias)))
			h.srv.PersonPost(alias, "start")
			h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "the agent ran"}}}})
			sum := h.run(alias)
			wantCode(t, sum, exit.Failed, exit.CodeWorkFolderNotAllowed)
			if !strings.Contains(sum.Error.Message, tc.says) || !strings.Contains(sum.Error.Message, "lies inside") {
				t.Fatalf("message %q does not name %s", sum.Error.Message, tc.says)
			}
		})
	}
}

// TestSymlinkedWorkFolderIsPinned: the checklist resolves a work folder's
// links, and the agent runs in the folder it approved even when the link
// is turned elsewhere between the check and the spawn (it used to run in
// the link's new target: here the state tree); later turns run there too,
// the link turned again, and a pinned folder that itself became a link is
// refused.
func TestSymlinkedWorkFolderIsPinned(t *testing.T) {
	h := newHarness(t, false)
	real := filepath.Join(t.TempDir(), "repo")
	other := filepath.Join(t.TempDir(), "other")
	for _, d := range []string{real, other} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	real, _ = filepath.EvalSymlinks(real)
	link := filepath.Join(t.TempDir(), "checkout")
	point := func(to string) {
		_ = os.Remove(link)
		if err := os.Symlink(to, link); err != nil {
			t.Fatal(err)
		}
	}
	point(real)
	const alias = "link/t"
	h.srv.Put(alias, string(envelope.NewThread(link, testAgent, "approval", alias)))
	h.srv.PersonPost(alias, "start")
	var started []string
	swapTo := h.state // what the link leads to once the checklist is done
	h.runner = func(r *Runner) {
		wrapStart(r, testAgent, func(next startFunc) startFunc {
			return func(ctx context.Context, l agent.Launch) (agent.Session, error) {
				point(swapTo) // after the checklist, before the spawn
				started = append(started, l.WorkFolder)
				return next(ctx, l)
			}
		})
	}
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "one"}}}})
	want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
	if th := h.thread(alias); th.Workspace.WorkFolder != link || th.Workspace.ResolvedFolder != real {
		t.Fatalf("workspace %+v, want %s pinned to %s", th.Workspace, link, real)
	}
	// The next run: the link leads elsewhere before the run even starts.
	point(other)
	swapTo = other
	h.srv.PersonPost(alias, "more")
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "two"}}}})
	want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
	if !slices.Equal(started, []string{real, real}) {
		t.Fatalf("the agent started in %q, want %q twice", started, real)
	}
	// The pinned folder itself replaced by a link: refused, not followed.
	linkInPlaceOf(t, real, real+".moved", other)
	h.srv.PersonPost(alias, "again")
	sum := h.run(alias)
	wantCode(t, sum, exit.Failed, exit.CodeWorkFolderNotAllowed)
	if !strings.Contains(sum.Error.Message, "now leads through a link to "+other) {
		t.Fatalf("message %q", sum.Error.Message)
	}
	if len(started) != 2 {
		t.Fatalf("an agent started in %q", started[2:])
	}
}

// TestThreadHome: an adapter that asks for a home of its own gets a folder
// of the thread's state when none is configured, recorded in thread.yaml
// and handed to every later start; a configured home wins.
func TestThreadHome(t *testing.T) {
	h := newHarness(t, false)
	var homes []string
	h.runner = func(r *Runner) {
		for i := range r.Setup.Adapters {
			if r.Setup.Adapters[i].Type == testAgent {
				r.Setup.Adapters[i].ThreadHome = true
			}
		}
		wrapStart(r, testAgent, func(next startFunc) startFunc {
			return func(ctx context.Context, l agent.Launch) (agent.Session, error) {
				homes = append(homes, l.Home)
				return next(ctx, l)
			}
		})
	}
	const alias = "home/own"
	h.handOff(alias, "approval", "start")
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "one"}}, {{Text: "two"}}}})
	want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
	h.srv.PersonPost(alias, "more")
	want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
	dir := filepath.Join(setup.ThreadDir(h.setup().JobDir, alias), setup.ThreadHomeDir)
	if len(homes) != 2 || homes[0] != dir || homes[1] != dir {
		t.Fatalf("homes %q, want %s twice", homes, dir)
	}
	if got := h.thread(alias).Agent.Resolved.AgentHome; got != dir {
		t.Errorf("thread.yaml agent_home %q, want %s", got, dir)
	}

	configured := filepath.Join(t.TempDir(), "configured")
	h.editConfig("  "+testAgent+":\n", "  "+testAgent+":\n    home: "+configured+"\n")
	const other = "home/configured"
	h.handOff(other, "approval", "start")
	want(t, h.run(other), OutcomeTurnCompleted, exit.OK)
	if got := homes[len(homes)-1]; got != configured {
		t.Errorf("home %q with agents.%s.home set, want %s", got, testAgent, configured)
	}
}

// TestUnsupportedAgentType: a type the build knows but cannot run fails
// the thread with AGENT_TYPE_UNSUPPORTED and the adapter's reason, names
// only the runnable types, and may not be configured.
func TestUnsupportedAgentType(t *testing.T) {
	h := newHarness(t, false)
	const alias = "unsupported/t"
	h.srv.Put(alias, string(envelope.NewThread(h.work, testUnsupported, "approval", alias)))
	h.srv.PersonPost(alias, "start")
	sum := h.run(alias)
	want(t, sum, OutcomeFailed, exit.Failed)
	if sum.Error == nil || sum.Error.Code != exit.CodeAgentTypeUnsupported || !strings.Contains(sum.Error.Message, "not supported yet") ||
		strings.Contains(sum.Error.Message, "use "+testUnsupported) || !strings.Contains(sum.Error.Message, testAgent) {
		t.Fatalf("error %+v", sum.Error)
	}
	h.editConfig("policy:", "  "+testUnsupported+": {}\npolicy:")
	o := setup.Options{APIURL: h.srv.URL(), APIKey: "k", StateDir: h.state, ConfigPath: h.config,
		RevisionID: "r", SessionID: "s", Home: h.state, Adapters: testAdapters()}
	_, err := setup.Resolve(o, "")
	if exit.Of(err).Exit != exit.Config || !strings.Contains(err.Error(), "not supported yet") {
		t.Fatalf("config with agents.%s: %v", testUnsupported, err)
	}
}
