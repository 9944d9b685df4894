package agenttest

import (
	"os"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/internal/hermetic"
)

func TestMain(m *testing.M) {
	MaybeRunFake()
	hermetic.Main(m.Run)
}

// FakeLaunch is a launch of this package's fake playing s.
func fakeLaunch(t *testing.T, s Script) agent.Launch {
	exe := Executable(t)
	log := FailureLog(t)
	return agent.Launch{Executable: exe, WorkFolder: t.TempDir(), Log: log.Log(),
		Env: []string{"PATH=" + os.Getenv("PATH"), ScriptEnv + "=" + WriteScript(t, s)}}
}

// The test agent passes the suite it stands in for, whichever side picks
// the session id.
func TestConformance(t *testing.T) {
	for _, host := range []bool{false, true} {
		name := "agent picks the session"
		if host {
			name = "host picks the session"
		}
		t.Run(name, func(t *testing.T) {
			Conformance(t, Fixture{Adapter: Agent{HostSessionID: host}.Adapter(), Launch: fakeLaunch,
				Graces:    func(s agent.Session) { s.(*Session).TurnGrace = time.Second },
				MaxQueued: func(s agent.Session, n int) { s.(*Session).MaxQueued = n }, AfterEnd: true})
		})
	}
}
