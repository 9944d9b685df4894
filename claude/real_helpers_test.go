//go:build realcli

package claude_test

// The set-up of the tests against the real pinned Claude Code (real_test.go).

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/claude/claudetest"
)

// env is one real-CLI test set-up: a model server, a work folder and an
// isolated config dir.
type env struct {
	t      *testing.T
	model  *claudetest.ModelServer
	work   string
	config string
	bin    string
}

func newEnv(t *testing.T, script ...claudetest.Step) *env {
	t.Helper()
	bin := claudetest.Bin(t)
	work, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, model: claudetest.NewModelServer(t, script...), work: work, config: t.TempDir(), bin: bin}
}

func (e *env) launch(permissions, sessionID string, resume bool) (agent.Launch, *syncBuf) {
	log := &syncBuf{}
	return agent.Launch{
		Executable: e.bin, WorkFolder: e.work, Env: e.model.Env(e.config),
		SessionID: sessionID, Resume: resume, Permissions: permissions,
		Home: e.config, Log: log.Log(),
	}, log
}

// record writes the agent's stdout lines to testdata/claude/<name>.jsonl
// when BHW_CLAUDE_RECORD is set (refreshing the decoder's transcripts).
func record(t *testing.T, name string, logs ...*syncBuf) {
	if os.Getenv("BHW_CLAUDE_RECORD") == "" {
		return
	}
	var b strings.Builder
	for _, l := range logs {
		for _, line := range l.Lines(agent.StreamStdout) {
			b.WriteString(line + "\n")
		}
	}
	if err := os.MkdirAll("../testdata/claude", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("../testdata/claude", name+".jsonl"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
