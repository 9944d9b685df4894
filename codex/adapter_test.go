package codex

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent"
)

// TestPreflightSandboxUnavailable: on a machine whose sandbox cannot run
// `true`, an approval or guarded thread is refused SANDBOX_UNAVAILABLE with
// the sandbox's own words; an autonomous thread (no sandbox) is not checked.
func TestPreflightSandboxUnavailable(t *testing.T) {
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	exe := filepath.Join(dir, "codex")
	script := "#!/bin/sh\ntouch " + ran + "\necho 'bwrap: No permissions to create new namespace (no user namespaces)' >&2\nexit 1\n"
	if err := os.WriteFile(exe, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	l := agent.Launch{Executable: exe, Env: []string{"PATH=/usr/bin:/bin"}, Permissions: "autonomous"}
	if err := Adapter.Preflight(context.Background(), l); err != nil {
		t.Fatalf("autonomous preflight: %v", err)
	}
	if exists(ran) {
		t.Fatal("the sandbox was checked for an autonomous thread")
	}
	for _, perm := range []string{"approval", "guarded"} {
		l.Permissions = perm
		err := Adapter.Preflight(context.Background(), l)
		var te *agent.Error
		if !errors.As(err, &te) || te.Code != CodeSandboxUnavailable || !strings.Contains(te.Message, "user namespaces") {
			t.Fatalf("%s preflight = %v, want %s naming the cause", perm, err, CodeSandboxUnavailable)
		}
	}
}

// TestOptions: agents.codex's own key is sandbox, workspace-write or
// read-only; anything else is refused by name.
func TestOptions(t *testing.T) {
	for _, tc := range []struct {
		raw  map[string]any
		want string // the sandbox a launch gets, or the error
	}{
		{nil, "workspace-write"},
		{map[string]any{"sandbox": "read-only"}, "read-only"},
		{map[string]any{"sandbox": "none"}, `sandbox "none": use workspace-write or read-only`},
		{map[string]any{"sandbox_mode": "read-only"}, `unknown key "sandbox_mode"`},
	} {
		o, err := Adapter.Options(tc.raw)
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			got = sandbox(agent.Launch{Options: o})
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("Options(%v) → %q, want %q", tc.raw, got, tc.want)
		}
	}
}
