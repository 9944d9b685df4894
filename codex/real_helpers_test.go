//go:build realcli

package codex

// The set-up of the tests against the real pinned Codex CLI (real_test.go).

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/codex/codextest"
)

var record = flag.Bool("record", false, "write the real CLI transcripts to testdata/codex")

// rig is one scenario: a fake model, a CODEX_HOME and a work folder shared by
// the processes of the scenario.
type rig struct {
	t     *testing.T
	bin   string
	model *codextest.ModelServer
	home  string
	work  string
	logs  []*agenttest.LogBuffer
	mu    sync.Mutex
}

func newRig(t *testing.T, steps ...codextest.Step) *rig {
	t.Helper()
	r := &rig{t: t, bin: codextest.Bin(t), model: codextest.NewModelServer(t, steps...)}
	base := t.TempDir()
	r.home = filepath.Join(base, "codex-home")
	r.work = filepath.Join(base, "work")
	if err := os.MkdirAll(r.work, 0o755); err != nil {
		t.Fatal(err)
	}
	codextest.WriteCodexHome(t, r.home, r.model.URL)
	t.Cleanup(func() {
		if *record || t.Failed() {
			r.dump()
		}
	})
	return r
}

func (r *rig) launch(permissions, sandbox string) agent.Launch {
	buf := &agenttest.LogBuffer{}
	r.mu.Lock()
	r.logs = append(r.logs, buf)
	r.mu.Unlock()
	return agent.Launch{
		Executable:  r.bin,
		WorkFolder:  r.work,
		Env:         codextest.Env(r.home),
		Permissions: permissions,
		Options:     Options{Sandbox: sandbox},
		Home:        r.home,
		Log:         buf.Log(),
	}
}

// start starts a process and closes it at the end of the test.
func (r *rig) start(l agent.Launch) *Session {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Start(ctx, l)
	if err != nil {
		r.t.Fatalf("Start: %v", err)
	}
	r.t.Cleanup(func() { closeNow(r.t, s) })
	return s
}

// dump writes the transcripts (host and agent lines; stderr dropped, it is
// noise with ANSI colours) to testdata/codex when -record is set, or to the
// test log on failure.
func (r *rig) dump() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, b := range r.logs {
		if r.t.Failed() {
			r.t.Logf("transcript %d:\n%s", i, b.String())
		}
		if !*record {
			continue
		}
		keep := transcript(b.String())
		name := strings.ReplaceAll(r.t.Name(), "/", "_")
		p := filepath.Join(agenttest.ModuleRoot(r.t), "testdata/codex", name+"-"+string(rune('0'+i))+".log")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.t.Error(err)
			return
		}
		if err := os.WriteFile(p, []byte(strings.Join(keep, "\n")+"\n"), 0o644); err != nil {
			r.t.Error(err)
		}
	}
}

func (r *rig) path(name string) string { return filepath.Join(r.work, name) }

// transcript is the protocol part of a thread.log in the form the files of
// testdata/codex keep: "codex> " before a line bhw-run sent, "codex< "
// before one the agent sent (stderr is noise with ANSI colours).
func transcript(log string) []string {
	var keep []string
	for _, l := range strings.Split(log, "\n") {
		_, stream, text, ok := agent.ParseLogLine(l)
		switch {
		case ok && stream == agent.StreamStdin:
			keep = append(keep, "codex> "+text)
		case ok && stream == agent.StreamStdout:
			keep = append(keep, "codex< "+text)
		}
	}
	return keep
}

func runTurn(t *testing.T, s *Session, msg string, h agent.Handler) agent.TurnResult {
	t.Helper()
	return agenttest.RunTurn(t, s, msg, h, 60*time.Second)
}
