package antigravity_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/antigravity"
	"github.com/blobhub/bhw-run/antigravity/agytest"
)

// conversations is the stand-in's conversation store for this test binary.
var conversations string

func TestMain(m *testing.M) {
	// The test binary is the stand-in agy, and the hook's program too
	// (os.Executable names it, as it names bhw-run in a real run).
	// The hook first: agy hands it its own environment, stand-in's
	// script included.
	if len(os.Args) > 1 && os.Args[1] == antigravity.HookArg {
		os.Exit(antigravity.Hook(os.Stdin, os.Stdout, os.Getenv))
	}
	agytest.MaybeRun()
	if spec := os.Getenv(antigravity.HolderEnv); spec != "" {
		antigravity.HoldForTest(spec)
	}
	dir, err := os.MkdirTemp("", "agytest-")
	if err != nil {
		panic(err)
	}
	conversations = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// launch is a launch of the stand-in playing s in a fresh work folder,
// with a state tree of the test's own.
func launch(t *testing.T, s agenttest.Script, permissions string) (agent.Launch, *agenttest.LogBuffer) {
	t.Helper()
	exe, env, _ := agytest.Command(t, s)
	log := agenttest.FailureLog(t)
	env = append(append(os.Environ(), env...), agytest.ConversationsEnv+"="+conversations)
	return agent.Launch{Executable: exe, WorkFolder: t.TempDir(), Env: env, Permissions: permissions, Log: log.Log(),
		CacheDir: filepath.Join(t.TempDir(), "cache")}, log
}
