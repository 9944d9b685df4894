package codex

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/codex/codextest"
	"github.com/blobhub/bhw-run/policy"
)

// The test binary doubles as a fake app-server (codextest) for the cases
// the real CLI cannot be made to show on demand: a crash mid-turn, an
// over-long server request, and the conformance suite's scenarios.
func TestMain(m *testing.M) {
	codextest.MaybeRunFakeAppServer()
	os.Exit(m.Run())
}

func fakeLaunch(t *testing.T, s agenttest.Script) agent.Launch {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var log agenttest.LogBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("thread.log:\n%s", log.String())
		}
	})
	return agent.Launch{
		Executable: exe, WorkFolder: t.TempDir(),
		Env:         []string{codextest.FakeEnv + "=" + agenttest.WriteScript(t, s), "PATH=/usr/bin:/bin"},
		Permissions: "approval",
		Log:         log.Log(),
	}
}

// TestConformance: the Codex adapter against the fake app-server.
func TestConformance(t *testing.T) {
	agenttest.Conformance(t, agenttest.Fixture{Adapter: Adapter, Launch: fakeLaunch,
		Graces: func(s agent.Session) {
			cs := s.(*Session)
			cs.StdinGrace, cs.KillGrace, cs.InterruptGrace = 100*time.Millisecond, 300*time.Millisecond, time.Second
		}})
}

func TestFakeCrashMidTurnIsAgentCrashed(t *testing.T) {
	s, err := Start(context.Background(), fakeLaunch(t, agenttest.Turn(agenttest.Step{Crash: 3, Stderr: "fake: dying mid-turn"})))
	if err != nil {
		t.Fatal(err)
	}
	defer closeNow(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = s.Turn(ctx, "hi", &recorder{})
	e := asEnvelopeError(err)
	if e == nil || e.Code != agent.CodeAgentCrashed || !strings.Contains(e.Message, "exit status 3") {
		t.Fatalf("Turn error %v", err)
	}
}

func TestFakeOverlongServerRequestIsAnswered(t *testing.T) {
	l := fakeLaunch(t, agenttest.Turn(agenttest.Step{BigRequest: 4096}))
	l.MaxLine = 1024
	s, err := Start(context.Background(), l)
	if err != nil {
		t.Fatal(err)
	}
	defer closeNow(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h := &recorder{Gate: func(policy.Call) policy.Verdict { t.Error("the gate saw an unread request"); return policy.Verdict{} }}
	res, err := s.Turn(ctx, "hi", h)
	if err != nil || res.Outcome != agent.TurnCompleted {
		t.Fatalf("Turn = %+v, %v", res, err)
	}
	texts := h.OfType(agent.ItemText)
	if len(texts) != 1 || !strings.Contains(texts[0].Brief, "big request answered: decline (<nil>)") ||
		!strings.Contains(texts[0].Brief, "unknown request answered: bhw-run does not support item/tool/requestUserInput (-32601)") {
		t.Fatalf("the fake saw %q", texts)
	}
}

func TestFakeCloseKillsStubbornProcess(t *testing.T) {
	// Ignores both its stdin closing and SIGTERM: Close must get to SIGKILL.
	dir := t.TempDir()
	script := dir + "/stubborn"
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntrap '' TERM\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	l := agent.Launch{Executable: script, WorkFolder: dir, Env: []string{"PATH=/usr/bin:/bin"}}
	s, err := spawn(l)
	if err != nil {
		t.Fatal(err)
	}
	s.StdinGrace, s.KillGrace = 50*time.Millisecond, 50*time.Millisecond
	start := time.Now()
	closeNow(t, s)
	select {
	case <-s.p.Done():
	default:
		t.Fatal("Close returned before the process was gone")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Close took %v", d)
	}
}

// An agent that stops reading its stdin leaves a large message stuck in the
// pipe; Close must still end the process, and the write must fail.
func TestFakeCloseWhileAWriteIsStuck(t *testing.T) {
	dir := t.TempDir()
	deaf := dir + "/deaf"
	if err := os.WriteFile(deaf, []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var log agenttest.LogBuffer
	writing := log.Signal(agent.StreamStdin)
	s, err := spawn(agent.Launch{Executable: deaf, WorkFolder: dir, Env: []string{"PATH=/usr/bin:/bin"}, Log: log.Log()})
	if err != nil {
		t.Fatal(err)
	}
	s.StdinGrace, s.KillGrace = 50*time.Millisecond, 50*time.Millisecond
	wrote := make(chan error, 1)
	go func() {
		wrote <- s.rpc.Notify("turn/start", strings.Repeat("x", 8<<20))
	}()
	<-writing // far more than a pipe holds: the write blocks
	closed := make(chan error, 1)
	go func() { closed <- s.Close(context.Background()) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close is stuck behind the blocked write")
	}
	select {
	case err := <-wrote:
		if err == nil {
			t.Error("the stuck write reported success")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the write is still stuck after Close")
	}
}
