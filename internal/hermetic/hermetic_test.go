package hermetic

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// A PATH folder that holds claude beside node keeps node and loses
// claude; a folder without an agent is kept as it is.
func TestAgentFreePathDropsOnlyTheAgents(t *testing.T) {
	npm, plain := t.TempDir(), t.TempDir()
	for _, f := range []string{filepath.Join(npm, "claude"), filepath.Join(npm, "node"), filepath.Join(plain, "git")} {
		if err := os.WriteFile(f, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path, err := AgentFreePath(npm+string(os.PathListSeparator)+plain, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", path)
	if p, err := exec.LookPath("claude"); err == nil {
		t.Errorf("claude found at %s on %s", p, path)
	}
	for _, want := range []string{"node", "git"} {
		if _, err := exec.LookPath(want); err != nil {
			t.Errorf("%s lost: %v (PATH %s)", want, err, path)
		}
	}
	if filepath.SplitList(path)[1] != plain {
		t.Errorf("PATH %s: the folder without an agent was not kept as it is", path)
	}
}

// After Isolate the user's keys, HOME and agents are gone, and Go's
// caches are where they were.
func TestIsolateHidesTheUsersLogin(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "claude"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("ANTHROPIC_API_KEY", "sk-user")
	t.Setenv("BLOBHUB_API_KEY", "bhk_user")
	t.Setenv("BHW_STATE_DIR", "/home/user/state")
	t.Setenv("HOME", "/home/user")
	t.Setenv("GOCACHE", "/the/cache")
	cleanup, err := Isolate()
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	for _, k := range []string{"ANTHROPIC_API_KEY", "BLOBHUB_API_KEY", "BHW_STATE_DIR"} {
		if v, ok := os.LookupEnv(k); ok {
			t.Errorf("%s=%s kept", k, v)
		}
	}
	if h := os.Getenv("HOME"); h == "/home/user" {
		t.Errorf("HOME kept: %s", h)
	}
	if _, err := exec.LookPath("claude"); err == nil {
		t.Error("claude still on PATH")
	}
	if c := os.Getenv("GOCACHE"); c != "/the/cache" {
		t.Errorf("GOCACHE %q, want the one set before", c)
	}
}
