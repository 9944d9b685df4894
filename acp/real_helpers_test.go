//go:build realcli

package acp

// The set-up of the tests against the real pinned ACP agents (real_test.go).

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/acp/acptest"
	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
)

// realRig is one real pinned agent against its fake model, with a home and
// a work folder shared by the processes of one test.
type realRig struct {
	t     *testing.T
	a     *acptest.Agent
	p     *preset
	model acptest.Fake
	setup acptest.Setup
	home  string
	work  string

	mu   sync.Mutex
	logs []*agenttest.LogBuffer
}

func newRealRig(t *testing.T, a *acptest.Agent) *realRig {
	t.Helper()
	root := t.TempDir()
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	g := &realRig{t: t, a: a, p: presetOf(t, a.Type), model: a.NewFake(t), home: filepath.Join(root, "home"), work: filepath.Join(root, "work")}
	for _, d := range []string{g.work, g.userHome()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	g.setup = a.Setup(t, g.model.BaseURL())
	t.Cleanup(func() {
		if t.Failed() {
			g.mu.Lock()
			defer g.mu.Unlock()
			for i, b := range g.logs {
				t.Logf("thread.log of process %d:\n%s", i+1, b.String())
			}
		}
	})
	return g
}

// launch is what run would hand Start, the allowlist applied by hand: the
// basics and the setup's variables.
func (g *realRig) launch(t *testing.T, permissions string) agent.Launch {
	buf := &agenttest.LogBuffer{}
	g.mu.Lock()
	g.logs = append(g.logs, buf)
	g.mu.Unlock()
	env := []string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "HOME=" + g.userHome(),
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost"}
	for k, v := range g.setup.Env {
		env = append(env, k+"="+v)
	}
	l := agent.Launch{Executable: g.a.Bin(t), WorkFolder: g.work, Env: env, Model: g.setup.Model,
		Permissions: permissions, Home: g.home, Log: buf.Log(),
		// The state tree's cache, where a session's creation is recorded.
		CacheDir: filepath.Join(filepath.Dir(g.home), "cache")}
	if g.p.options != nil {
		raw := map[string]any{}
		for k, v := range g.setup.Own {
			raw[k] = v
		}
		o, err := g.p.options(raw)
		if err != nil {
			t.Fatal(err)
		}
		l.Options = o
	}
	return l
}

// userHome is HOME, the user's own home, which the agents leave alone.
func (g *realRig) userHome() string { return filepath.Join(filepath.Dir(g.home), "user") }

// start starts one process and closes it at the end of the test.
func (g *realRig) start(t *testing.T, l agent.Launch) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := start(ctx, g.p, l)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { closeNow(t, s) })
	return s
}
