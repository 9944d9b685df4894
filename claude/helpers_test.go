package claude_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/claude"
	"github.com/blobhub/bhw-run/claude/claudetest"
)

func TestMain(m *testing.M) {
	claudetest.MaybeRunFakeAgent()
	os.Exit(m.Run())
}

const pinnedRel = ".tools/node_modules/@anthropic-ai/claude-code-linux-x64/claude"

// claudeBin is the real pinned CLI: $BHW_CLAUDE_BIN or the module's .tools.
func claudeBin(t *testing.T) string {
	t.Helper()
	p := os.Getenv("BHW_CLAUDE_BIN")
	if p == "" {
		dir, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				break
			}
			up := filepath.Dir(dir)
			if up == dir {
				t.Fatal("go.mod not found above the test directory")
			}
			dir = up
		}
		p = filepath.Join(dir, pinnedRel)
	}
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the pinned claude CLI is missing at %s (%v); run `make test`, which installs it", p, err)
		}
		t.Fatalf("the pinned claude CLI is missing at %s (%v); run `make test` to install it, or set BHW_CLAUDE_BIN", p, err)
	}
	return p
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// syncBuf is a thread.log in memory.
type syncBuf = agenttest.LogBuffer

// recorder is the shared test Handler.
type recorder = agenttest.Recorder

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
	bin := claudeBin(t)
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

// start starts a session and closes it at cleanup.
func start(t *testing.T, l agent.Launch) *claude.Session {
	t.Helper()
	s, err := claude.Start(context.Background(), l)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = s.Close(ctx)
	})
	return s
}

// turn runs one turn with a deadline.
func turn(t *testing.T, s *claude.Session, msg string, h agent.Handler) agent.TurnResult {
	t.Helper()
	return agenttest.RunTurn(t, s, msg, h, 60*time.Second)
}

func closeSession(t *testing.T, s *claude.Session) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
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

func asEnvelopeError(err error) *agent.Error {
	var e *agent.Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}
