package codex

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/confine"
)

// TestPreflightSandboxUnavailable: on a machine whose sandbox cannot run
// `true`, an approval or guarded thread is refused SANDBOX_UNAVAILABLE with
// the sandbox's own words; an autonomous or a confined thread (no Codex
// sandbox) is not checked.
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
	l.Permissions, l.Confine = "approval", &confine.Rules{}
	if err := Adapter.Preflight(context.Background(), l); err != nil {
		t.Fatalf("confined approval preflight: %v", err)
	}
	if exists(ran) {
		t.Fatal("the sandbox was checked for an autonomous or a confined thread")
	}
	l.Confine = nil
	for _, perm := range []string{"approval", "guarded"} {
		l.Permissions = perm
		err := Adapter.Preflight(context.Background(), l)
		var te *agent.Error
		if !errors.As(err, &te) || te.Code != CodeSandboxUnavailable || !strings.Contains(te.Message, "user namespaces") {
			t.Fatalf("%s preflight = %v, want %s naming the cause", perm, err, CodeSandboxUnavailable)
		}
	}
}

// TestPreflightSandboxCached: a sandbox check that passed is remembered in
// the cache folder for the executable as it is on disk, so the next run
// does not start Codex for it again; another executable, a changed one (its
// size or mtime), a deleted cache file or a check that failed all check
// again, and a failure is never remembered.
func TestPreflightSandboxCached(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	fail := filepath.Join(dir, "fail")
	writeExe := func(path, extra string) {
		t.Helper()
		script := "#!/bin/sh\necho x >> " + calls + "\n[ -e " + fail + " ] && { echo 'bwrap: no user namespaces' >&2; exit 1; }\nexit 0\n" + extra
		if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	exe, other := filepath.Join(dir, "codex"), filepath.Join(dir, "codex-other")
	writeExe(exe, "")
	writeExe(other, "")
	cacheDir := filepath.Join(dir, "state", "cache")
	l := agent.Launch{Executable: exe, Env: []string{"PATH=/usr/bin:/bin"}, Permissions: "approval", CacheDir: cacheDir}
	checks := func() int {
		b, _ := os.ReadFile(calls)
		return strings.Count(string(b), "x")
	}
	step := func(what string, l agent.Launch, wantOK bool, wantChecks int) {
		t.Helper()
		err := Adapter.Preflight(context.Background(), l)
		if (err == nil) != wantOK || checks() != wantChecks {
			t.Fatalf("%s: preflight %v, %d checks; want ok=%v after %d checks", what, err, checks(), wantOK, wantChecks)
		}
	}
	step("first run", l, true, 1)
	step("second run", l, true, 1)
	l.Permissions = "guarded"
	step("a guarded thread", l, true, 1)
	step("another executable", agent.Launch{Executable: other, Env: l.Env, Permissions: "approval", CacheDir: cacheDir}, true, 2)
	writeExe(exe, "# a new version\n")
	step("a changed executable", l, true, 3)
	step("the changed executable again", l, true, 3)
	if err := os.Remove(filepath.Join(cacheDir, SandboxCacheFile)); err != nil {
		t.Fatal(err)
	}
	step("the cache file deleted", l, true, 4)
	if err := os.WriteFile(fail, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	writeExe(exe, "# broken\n")
	step("a failing check", l, false, 5)
	step("a failing check again", l, false, 6)
	l.CacheDir = ""
	step("no cache folder", agent.Launch{Executable: other, Env: l.Env, Permissions: "approval"}, false, 7)
}

// TestOptions: agents.codex's own key is sandbox, workspace-write or
// read-only; anything else is refused by name.
func TestOptions(t *testing.T) {
	for _, tc := range []struct {
		raw  map[string]any
		want string // the sandbox an unconfined approval launch gets, or the error
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
			_, got = posture(agent.Launch{Options: o, Permissions: "approval"})
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("Options(%v) → %q, want %q", tc.raw, got, tc.want)
		}
	}
}

// TestPosture: what each posture runs Codex with, confined or not. A
// confined gated thread has no Codex sandbox (it cannot run inside
// Landlock) and asks before every command and file change, whatever
// agents.codex.sandbox says.
func TestPosture(t *testing.T) {
	ro := Options{Sandbox: "read-only"}
	rules := &confine.Rules{}
	for _, tc := range []struct {
		l             agent.Launch
		approval, sbx string
	}{
		{agent.Launch{Permissions: "autonomous"}, "never", "danger-full-access"},
		{agent.Launch{Permissions: "autonomous", Confine: rules}, "never", "danger-full-access"},
		{agent.Launch{Permissions: "approval"}, "on-request", "workspace-write"},
		{agent.Launch{Permissions: "guarded", Options: ro}, "on-request", "read-only"},
		{agent.Launch{Permissions: "approval", Confine: rules}, "untrusted", "danger-full-access"},
		{agent.Launch{Permissions: "guarded", Confine: rules, Options: ro}, "untrusted", "danger-full-access"},
	} {
		if a, s := posture(tc.l); a != tc.approval || s != tc.sbx {
			t.Errorf("%s confined %v: %s, %s; want %s, %s", tc.l.Permissions, tc.l.Confine != nil, a, s, tc.approval, tc.sbx)
		}
	}
}

// TestSandboxConfig: only workspace-write gets its bounds pinned, to no
// network and no writable root beyond the work and temp folders.
func TestSandboxConfig(t *testing.T) {
	for _, sb := range []string{"read-only", "danger-full-access", ""} {
		if c := sandboxConfig(sb); c != nil {
			t.Errorf("%q: %v, want nil", sb, c)
		}
	}
	ww, _ := sandboxConfig("workspace-write")["sandbox_workspace_write"].(map[string]any)
	if ww["network_access"] != false || fmt.Sprint(ww["writable_roots"]) != "[]" || len(ww) != 2 {
		t.Errorf("workspace-write: %v", ww)
	}
}
