package codex

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/codex/codextest"
	"github.com/blobhub/bhw-run/internal/hermetic"
	"github.com/blobhub/bhw-run/policy"
)

// The test binary doubles as a fake app-server (codextest) for the cases
// the real CLI cannot be made to show on demand: a crash mid-turn, an
// over-long server request, and the conformance suite's scenarios.
func TestMain(m *testing.M) {
	codextest.MaybeRunFakeAppServer()
	hermetic.Main(m.Run)
}

func fakeLaunch(t *testing.T, s agenttest.Script) agent.Launch {
	exe := agenttest.Executable(t)
	log := agenttest.FailureLog(t)
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
		},
		MaxQueued: func(s agent.Session, n int) { s.(*Session).MaxQueued = n }, AfterEnd: true})
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
		t.Fatalf("the fake saw %+v", texts)
	}
}
