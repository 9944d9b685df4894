package e2e

// `bhw-run doctor` against the httptest BlobHub, the built binary run as a
// scheduler would run it: every ✗ line provoked by the fault it names. A
// whole set-up where every line holds, with the real pinned CLIs, is in
// doctor_realcli_test.go.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/acp"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/claude/claudetest"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/lock"
	"github.com/blobhub/bhw-run/run"
	"github.com/blobhub/bhw-run/setup"
)

// doctorEnv is an e2e env whose session exists on the hub and whose
// Claude agent is the fake, which answers --version.
func doctorEnv(t *testing.T) *e2eEnv {
	e := newE2E(t)
	e.srv.Put("notes/readme", `{"type":"text","text":"hello"}`)
	e.fakeClaudeDone()
	e.Env = append(e.Env, doctorAgentKeys...)
	return e
}

// doctorAgentKeys log Claude Code and Codex in through their environment, for
// the doctor's "agent … login" lines to hold.
var doctorAgentKeys = []string{"ANTHROPIC_API_KEY=sk-ant-doctor", "OPENAI_API_KEY=sk-doctor"}

// doctor runs `bhw-run doctor --json` with key and the extra environment,
// and returns its exit code and checks by name.
func (e *e2eEnv) doctor(key string, extraEnv ...string) (int, map[string]run.Check) {
	e.t.Helper()
	p := e.start(key, extraEnv, "doctor", "--json")
	code := p.wait()
	e.t.Logf("doctor → exit %d\n%s%s", code, p.stdout, p.stderr)
	var list []run.Check
	if err := json.Unmarshal(p.stdout.Bytes(), &list); err != nil {
		e.t.Fatalf("doctor --json printed %q: %v", p.stdout, err)
	}
	checks := map[string]run.Check{}
	for _, c := range list {
		if _, dup := checks[c.Check]; dup {
			e.t.Errorf("two checks named %q", c.Check)
		}
		checks[c.Check] = c
	}
	return code, checks
}

// wantFailed: the doctor exited 78 and check failed with a detail holding
// detail and a fix holding fix.
func wantFailed(t *testing.T, code int, checks map[string]run.Check, check, detail, fix string) {
	t.Helper()
	c, ok := checks[check]
	switch {
	case code != exit.Config:
		t.Errorf("doctor exit %d, want %d", code, exit.Config)
	case !ok:
		t.Errorf("no check %q in %v", check, checks)
	case c.OK:
		t.Errorf("%s holds (%s), want it to fail", check, c.Detail)
	case !strings.Contains(c.Detail, detail):
		t.Errorf("%s: detail %q, want it to say %q", check, c.Detail, detail)
	case !strings.Contains(c.Fix, fix):
		t.Errorf("%s: fix %q, want it to say %q", check, c.Fix, fix)
	}
}

// onlyFailed: every check but those named holds.
func onlyFailed(t *testing.T, checks map[string]run.Check, names ...string) {
	t.Helper()
	for n, c := range checks {
		failed := !c.OK
		want := false
		for _, x := range names {
			want = want || x == n
		}
		if failed != want {
			t.Errorf("%s: ok=%v (%s), want ok=%v", n, c.OK, c.Detail, !want)
		}
	}
}

// TestDoctorFileStore: a file:// store needs no key, and a session it has
// never written is not a failure (the first thread creates it); the state
// tree's name (local-<hash>) is printed.
func TestDoctorFileStore(t *testing.T) {
	e := newE2E(t)
	e.useFileStore()
	e.fakeClaudeDone()
	e.Env = append(e.Env, doctorAgentKeys...)
	// No --state-dir: the default tree under HOME, named after the store.
	var env []string
	for _, kv := range e.environ("") {
		if !strings.HasPrefix(kv, "BHW_STATE_DIR=") && !strings.HasPrefix(kv, "BHW_CONFIG=") {
			env = append(env, kv)
		}
	}
	cmd := exec.Command(bhwBin, "doctor", "--json", "--config", e.configPath())
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("doctor: %v\n%s", err, out)
	}
	var list []run.Check
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatal(err)
	}
	for _, c := range list {
		if !c.OK {
			t.Errorf("%s: %s", c.Check, c.Detail)
		}
		switch c.Check {
		case "credentials", "api":
			if !strings.Contains(c.Detail, "local store") {
				t.Errorf("%s: %q, want it to say a local store needs no key", c.Check, c.Detail)
			}
		case "state_dir":
			if !strings.Contains(c.Detail, filepath.Join(e.home, ".blobhub-worker", "profiles", "local-")) {
				t.Errorf("state_dir %q, want ~/.blobhub-worker/profiles/local-<hash>", c.Detail)
			}
		case "section":
			if !strings.Contains(c.Detail, "thread new") {
				t.Errorf("section %q, want it to say the first thread creates the session", c.Detail)
			}
		}
	}
}

func TestDoctorBadKey(t *testing.T) {
	e := doctorEnv(t)
	code, checks := e.doctor("bhk_revoked")
	wantFailed(t, code, checks, "api", exit.CodeAuthInvalid, "check the key")
	wantFailed(t, code, checks, "section", run.NotChecked, "")
	onlyFailed(t, checks, "api", "section")
}

func TestDoctorUnreachable(t *testing.T) {
	e := doctorEnv(t)
	// Nothing listens on port 1 of the loopback.
	code, checks := e.doctor(bhtest.RunnerKey, "BLOBHUB_API_URL=http://127.0.0.1:1/v1")
	wantFailed(t, code, checks, "api", exit.CodeUnavailable, "check the network")
}

func TestDoctorMissingSection(t *testing.T) {
	e := doctorEnv(t)
	e.Config.Sections = []setup.Section{{Name: "backend", Session: setup.SessionTuple{OrgID: "org_1", BlobID: "blb_1", RevisionID: bhtest.RevisionID, SessionID: bhtest.SessionID}}}
	e.writeConfig()
	code, checks := e.doctor(bhtest.RunnerKey, "BHW_SECTION=frontend")
	wantFailed(t, code, checks, "section", `no section named "frontend"`, "")
	onlyFailed(t, checks, "section")
}

func TestDoctorSessionNotFound(t *testing.T) {
	e := doctorEnv(t)
	code, checks := e.doctor(bhtest.RunnerKey, "BHW_SESSION_ID=ses_nosuch")
	wantFailed(t, code, checks, "section", exit.CodeSessionNotFound, "session_id")
	onlyFailed(t, checks, "section")
}

func TestDoctorBadConfig(t *testing.T) {
	e := doctorEnv(t)
	if err := os.WriteFile(e.configPath(), []byte("agents:\n  claude_code:\n    executible: claude\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, checks := e.doctor(bhtest.RunnerKey)
	wantFailed(t, code, checks, "config", `unknown key "executible"`, "config.example.yaml")
}

func TestDoctorAgentNotExecutable(t *testing.T) {
	e := doctorEnv(t)
	e.scriptAgent(claudeType, "claude", "#!/bin/sh\necho 1.0\n", 0o644)
	code, checks := e.doctor(bhtest.RunnerKey)
	wantFailed(t, code, checks, "agent claude_code", exit.CodeAgentNotInstalled, "agents.claude_code.executable")
	onlyFailed(t, checks, "agent claude_code")
}

func TestDoctorAgentWithoutVersion(t *testing.T) {
	e := doctorEnv(t)
	e.scriptAgent(claudeType, "claude", "#!/bin/sh\necho 'unknown option --version' >&2\nexit 2\n", 0o755)
	code, checks := e.doctor(bhtest.RunnerKey)
	wantFailed(t, code, checks, "agent claude_code", "unknown option --version", "--version")
}

// TestDoctorCodexSandbox: Codex confined (the default) needs no sandbox
// of its own, so the preflight passes on a machine where bubblewrap
// cannot start; with agents.codex.confine: off it fails (a stand-in
// codex whose sandbox cannot start) and the line says
// SANDBOX_UNAVAILABLE.
func TestDoctorCodexSandbox(t *testing.T) {
	e := doctorEnv(t)
	script := "#!/bin/sh\ncase \"$1\" in\n--version) echo codex-cli 0.171.0 ;;\nsandbox) echo 'bwrap: No permissions to create a new namespace' >&2; exit 1 ;;\nesac\n"
	e.scriptAgent(codexType, "codex", script, 0o755)
	_, checks := e.doctor(bhtest.RunnerKey)
	if c := checks["agent codex preflight"]; !c.OK {
		t.Fatalf("confined: the codex preflight is %+v, want ok", c)
	}
	e.agentConfig(codexType).Confine = "off"
	e.writeConfig()
	code, checks := e.doctor(bhtest.RunnerKey)
	wantFailed(t, code, checks, "agent codex preflight", "SANDBOX_UNAVAILABLE", "autonomous")
	if !strings.Contains(checks["agent codex preflight"].Detail, "No permissions to create a new namespace") {
		t.Errorf("the preflight's detail does not carry the sandbox's own words: %q", checks["agent codex preflight"].Detail)
	}
	onlyFailed(t, checks, "agent codex preflight")
}

func TestDoctorHeldSlot(t *testing.T) {
	e := doctorEnv(t)
	e.Config.Concurrency.MaxAgents = 1
	e.writeConfig()
	s, err := lock.TrySlot(filepath.Join(e.state, "slots"), 1)
	if err != nil {
		t.Fatal(err)
	}
	code, checks := e.doctor(bhtest.RunnerKey)
	wantFailed(t, code, checks, "slots", "all 1 agent slots", "max_agents")
	onlyFailed(t, checks, "slots")
	if err := s.Release(); err != nil {
		t.Fatal(err)
	}
	if code, checks := e.doctor(bhtest.RunnerKey); code != 0 || !strings.Contains(checks["slots"].Detail, "0 of 1") {
		t.Errorf("after the release: exit %d, slots %+v", code, checks["slots"])
	}
}

func TestDoctorWorldReadableCredentials(t *testing.T) {
	e := doctorEnv(t)
	path := setup.CredentialsPath(e.home)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf("default: test\nprofiles:\n  test: { api_key: %s, api_url: %s }\n", bhtest.RunnerKey, e.srv.URL())
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	code, checks := e.doctor(bhtest.RunnerKey)
	wantFailed(t, code, checks, "credentials", exit.CodeInsecureCredentials, "chmod 600 "+path)
	wantFailed(t, code, checks, "api", run.NotChecked, "")

	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, checks := e.doctor(bhtest.RunnerKey); code != 0 || !strings.Contains(checks["credentials"].Detail, "mode 0600") {
		t.Errorf("after chmod 600: exit %d, credentials %+v", code, checks["credentials"])
	}
}

// TestDoctorWorkerCredentials: the Python blobhub-worker's own credentials
// file holds a key too; world-readable, it is a ✗ line of its own.
func TestDoctorWorkerCredentials(t *testing.T) {
	e := doctorEnv(t)
	path := filepath.Join(e.home, ".blobhub-worker", "credentials.yaml")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("api:\n  key: bhk_v1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, checks := e.doctor(bhtest.RunnerKey)
	wantFailed(t, code, checks, "worker_credentials", exit.CodeInsecureCredentials, "chmod 600 "+path)
	onlyFailed(t, checks, "worker_credentials")
}

// TestDoctorRunningWorker: the instance file a running blobhub-worker keeps
// in its state tree (pid, host) makes the tree shared: ✗; the same file
// naming a dead pid, or a live one that runs something other than
// blobhub-worker (a pid used again), is stale: ✓.
func TestDoctorRunningWorker(t *testing.T) {
	e := doctorEnv(t)
	host, _ := os.Hostname()
	marker := func(pid int) {
		t.Helper()
		body := fmt.Sprintf("instance:\n  instance_id: ins_01J\n  pid: %d\n  host: %s\n  version: 0.1.0\n  started_at: 2026-05-27T12:35:00Z\n", pid, host)
		if err := os.WriteFile(filepath.Join(e.state, "instance.yaml"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pid := workerLookalike(t)
	marker(pid)
	code, checks := e.doctor(bhtest.RunnerKey)
	wantFailed(t, code, checks, "blobhub_worker", fmt.Sprintf("pid %d", pid), "stop that blobhub-worker")
	onlyFailed(t, checks, "blobhub_worker")

	marker(os.Getpid())
	if code, checks := e.doctor(bhtest.RunnerKey); code != 0 || !strings.Contains(checks["blobhub_worker"].Detail, "stale") {
		t.Errorf("a pid that is no blobhub-worker: exit %d, %+v", code, checks["blobhub_worker"])
	}

	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	marker(gone.Process.Pid)
	if code, checks := e.doctor(bhtest.RunnerKey); code != 0 || !strings.Contains(checks["blobhub_worker"].Detail, "stale") {
		t.Errorf("a dead pid: exit %d, %+v", code, checks["blobhub_worker"])
	}
}

// TestDoctorStateDirNotWritable: a state tree its user cannot write (and
// whose mode is not 0700) is ✗ with both fixes. Root writes anywhere, so
// under root the doctor runs as nobody, on a tree nobody owns.
func TestDoctorStateDirNotWritable(t *testing.T) {
	e := doctorEnv(t)
	e.useFileStore()
	state := filepath.Join(e.root, "ro-state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	var cred *syscall.Credential
	if os.Getuid() == 0 {
		// nobody must reach the tree, the config and the fake agent.
		for d := state; d != "/"; d = filepath.Dir(d) {
			if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o005 != 0o005 {
				if err := os.Chmod(d, fi.Mode().Perm()|0o005); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, f := range []string{filepath.Dir(bhwBin), e.configPath(), e.state, e.home, e.tmp} {
			_ = os.Chmod(f, 0o755)
		}
		if err := os.Chown(state, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		cred = &syscall.Credential{Uid: 65534, Gid: 65534}
	}
	if err := os.Chmod(state, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(state, 0o700) })
	cmd := exec.Command(bhwBin, "doctor", "--json")
	cmd.Env = append(e.environ(""), "BHW_STATE_DIR="+state, "HOME="+e.tmp)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	t.Logf("doctor → exit %d\n%s", code, out)
	var list []run.Check
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	checks := map[string]run.Check{}
	for _, c := range list {
		checks[c.Check] = c
	}
	wantFailed(t, code, checks, "state_dir", "is not writable", "chmod u+w "+state)
	wantFailed(t, code, checks, "state_dir", "has mode 0500", "chmod 700 "+state)
}

// TestDoctorFakeVersion pins the fake's --version, which the other doctor
// tests rely on to find the agent healthy.
func TestDoctorFakeVersion(t *testing.T) {
	e := doctorEnv(t)
	_, checks := e.doctor(bhtest.RunnerKey)
	if d := checks["agent claude_code"].Detail; !strings.HasSuffix(d, claudetest.FakeVersion) {
		t.Errorf("agent claude_code: %q, want the fake's version", d)
	}
}

// TestDoctorNoKey: BlobHub over https with no key anywhere.
func TestDoctorNoKey(t *testing.T) {
	e := doctorEnv(t)
	code, checks := e.doctor("", "BLOBHUB_API_URL=https://api.blobhub.example/v1")
	wantFailed(t, code, checks, "credentials", exit.CodeCredentialsNotFound, "BLOBHUB_API_KEY")
	wantFailed(t, code, checks, "slots", run.NotChecked, "")
}

// TestDoctorIdentityMismatch: the state tree was recorded for another
// user than the key's.
func TestDoctorIdentityMismatch(t *testing.T) {
	e := doctorEnv(t)
	if err := os.WriteFile(filepath.Join(e.state, "identity.yaml"), []byte("user_id: usr_someone_else\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, checks := e.doctor(bhtest.RunnerKey)
	wantFailed(t, code, checks, "api", exit.CodeUserIdentityMismatch, "usr_someone_else")
	onlyFailed(t, checks, "api")
}

// TestDoctorStateDirNotAFolder: a file where the state tree should be.
func TestDoctorStateDirNotAFolder(t *testing.T) {
	e := doctorEnv(t)
	file := filepath.Join(e.root, "state-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	code, checks := e.doctor(bhtest.RunnerKey, "BHW_STATE_DIR="+file, "BHW_CONFIG="+e.configPath())
	wantFailed(t, code, checks, "state_dir", "is not a folder", "--state-dir")
}

// TestDoctorWorkerMarkers: an instance file of another host, or one that is
// no blobhub-worker instance, cannot be told stale from here: ✗.
func TestDoctorWorkerMarkers(t *testing.T) {
	for name, body := range map[string]string{
		"other host": "instance:\n  instance_id: ins_01J\n  pid: 1\n  host: elsewhere.example\n",
		"garbage":    "{{{ not yaml",
	} {
		t.Run(name, func(t *testing.T) {
			e := doctorEnv(t)
			if err := os.WriteFile(filepath.Join(e.state, "instance.yaml"), []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			code, checks := e.doctor(bhtest.RunnerKey)
			wantFailed(t, code, checks, "blobhub_worker", "instance.yaml", "stop that blobhub-worker")
			onlyFailed(t, checks, "blobhub_worker")
		})
	}
}

// TestDoctorStateTreeNotTrusted: a state tree a run would refuse (writable
// by others, or another user's) fails doctor with the run's own code and
// fix, not with a weaker check of doctor's own.
func TestDoctorStateTreeNotTrusted(t *testing.T) {
	t.Run("writable by others", func(t *testing.T) {
		e := doctorEnv(t)
		if err := os.Chmod(e.state, 0o777); err != nil {
			t.Fatal(err)
		}
		code, checks := e.doctor(bhtest.RunnerKey)
		wantFailed(t, code, checks, "state_dir", exit.CodeInsecurePermissions, "chmod go-w "+e.state)
	})
	t.Run("another user's", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Fatal("this case gives the state tree to another user: run the tests as root (make test does under CI)")
		}
		e := doctorEnv(t)
		if err := os.Chown(e.state, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		code, checks := e.doctor(bhtest.RunnerKey)
		wantFailed(t, code, checks, "state_dir", exit.CodeInsecurePermissions, "chown -R 0 "+e.state)
	})
}

// standIn writes an executable script named name below e.root that
// answers --version with version, and returns its path.
func (e *e2eEnv) standIn(name, version string) string {
	e.t.Helper()
	exe := filepath.Join(e.root, name)
	if err := os.WriteFile(exe, []byte("#!/bin/sh\necho "+version+"\n"), 0o755); err != nil {
		e.t.Fatal(err)
	}
	return exe
}

// scriptAgent writes script below e.root as name, with mode, makes it
// agents.typ.executable and writes the config; it returns the script's
// path.
func (e *e2eEnv) scriptAgent(typ, name, script string, mode os.FileMode) string {
	e.t.Helper()
	exe := filepath.Join(e.root, name)
	if err := os.WriteFile(exe, []byte(script), mode); err != nil {
		e.t.Fatal(err)
	}
	e.agentConfig(typ).Executable = exe
	e.writeConfig()
	return exe
}

// TestDoctorClaudeLogin: Claude Code with no key in its environment and no
// login file is ✗ AGENT_AUTH_FAILED with the fix a failed run names; the
// .credentials.json /login writes, in ~/.claude or in the configured
// config_dir, makes it ✓.
func TestDoctorClaudeLogin(t *testing.T) {
	e := newE2E(t)
	e.srv.Put("notes/readme", `{"type":"text","text":"hello"}`)
	e.fakeClaudeDone()
	code, checks := e.doctor(bhtest.RunnerKey)
	wantFailed(t, code, checks, "agent claude_code login", exit.CodeAgentAuthFailed, "type /login")
	if d := checks["agent claude_code login"].Detail; !strings.Contains(d, filepath.Join(e.home, ".claude", ".credentials.json")) {
		t.Errorf("the ✗ line does not say where it looked: %q", d)
	}
	onlyFailed(t, checks, "agent claude_code login")

	if err := os.MkdirAll(filepath.Join(e.home, ".claude"), 0o700); err != nil {
		t.Fatal(err)
	}
	claudetest.WriteOAuthLogin(t, filepath.Join(e.home, ".claude"), time.Now().Add(time.Hour))
	code, checks = e.doctor(bhtest.RunnerKey)
	if c := checks["agent claude_code login"]; code != 0 || !c.OK || !strings.Contains(c.Detail, "logged in") {
		t.Errorf("with ~/.claude/.credentials.json: exit %d, %+v", code, c)
	}

	dir := filepath.Join(e.root, "claude-config")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	e.agentConfig(claudeType).Own["config_dir"] = dir
	e.writeConfig()
	code, checks = e.doctor(bhtest.RunnerKey)
	wantFailed(t, code, checks, "agent claude_code login", dir, "CLAUDE_CONFIG_DIR="+dir+" claude")
	claudetest.WriteOAuthLogin(t, dir, time.Now().Add(time.Hour))
	if code, checks := e.doctor(bhtest.RunnerKey); code != 0 || !strings.Contains(checks["agent claude_code login"].Detail, dir) {
		t.Errorf("with config_dir's .credentials.json: exit %d, %+v", code, checks["agent claude_code login"])
	}
	for _, key := range []string{"ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"} {
		if err := os.Remove(filepath.Join(dir, ".credentials.json")); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if code, checks := e.doctor(bhtest.RunnerKey, key+"=tok"); code != 0 || !strings.Contains(checks["agent claude_code login"].Detail, key) {
			t.Errorf("with %s: exit %d, %+v", key, code, checks["agent claude_code login"])
		}
	}
}

// TestDoctorCodexLogin: Codex with no key and no auth.json is ✗ with
// `codex login`; the auth.json it writes in CODEX_HOME makes it ✓, and so
// does the env_key a model_providers entry of its config.toml names.
func TestDoctorCodexLogin(t *testing.T) {
	e := newE2E(t)
	e.srv.Put("notes/readme", `{"type":"text","text":"hello"}`)
	e.Config.Agents = nil
	e.agentConfig(codexType).Executable = e.standIn("codex", "codex-cli 0.171.0")
	e.agentConfig(codexType).Own["sandbox"] = "read-only"
	e.writeConfig()
	home := filepath.Join(e.root, "codex-home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	code, checks := e.doctor(bhtest.RunnerKey, "CODEX_HOME="+home)
	wantFailed(t, code, checks, "agent codex login", filepath.Join(home, "auth.json"), "CODEX_HOME="+home+" codex login")

	toml := "[model_providers.mine]\nbase_url = \"http://127.0.0.1:1/v1\"\nenv_key = \"MINE_KEY\"\n"
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	// MINE_KEY reaches Codex through agents.codex.env, as the fix says.
	e.agentConfig(codexType).Env = map[string]string{"MINE_KEY": "k"}
	e.writeConfig()
	_, checks = e.doctor(bhtest.RunnerKey, "CODEX_HOME="+home)
	if c := checks["agent codex login"]; !c.OK || !strings.Contains(c.Detail, "MINE_KEY") {
		t.Errorf("with the provider's env_key set: %+v", c)
	}
	e.agentConfig(codexType).Env = nil
	e.writeConfig()

	if err := os.WriteFile(filepath.Join(home, "auth.json"), []byte(`{"OPENAI_API_KEY":"sk-x"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, checks = e.doctor(bhtest.RunnerKey, "CODEX_HOME="+home)
	if c := checks["agent codex login"]; !c.OK || !strings.Contains(c.Detail, filepath.Join(home, "auth.json")) {
		t.Errorf("with auth.json: %+v", c)
	}
}

// TestDoctorACPLogin: an ACP preset without any of its key variables is ✗
// with the preset's own fix, and ✓ once one is in bhw-run's environment;
// the generic ACP agent's login is not checked, which its ✓ line says.
func TestDoctorACPLogin(t *testing.T) {
	e := newE2E(t)
	e.srv.Put("notes/readme", `{"type":"text","text":"hello"}`)
	e.Config.Agents = nil
	e.agentConfig(acp.TypeGemini).Executable = e.standIn("gemini", "0.30.0")
	e.agentConfig(acp.TypeGeneric).Executable = e.standIn("acp-agent", "1.0")
	e.writeConfig()
	code, checks := e.doctor(bhtest.RunnerKey)
	wantFailed(t, code, checks, "agent gemini login", "GEMINI_API_KEY", "set GEMINI_API_KEY")
	onlyFailed(t, checks, "agent gemini login")
	if c := checks["agent acp login"]; !c.OK || !strings.HasPrefix(c.Detail, run.NotChecked) {
		t.Errorf("the generic agent's login: %+v, want ✓ %q…", c, run.NotChecked)
	}
	code, checks = e.doctor(bhtest.RunnerKey, "GOOGLE_API_KEY=g")
	if c := checks["agent gemini login"]; code != 0 || !c.OK || !strings.Contains(c.Detail, "GOOGLE_API_KEY") {
		t.Errorf("with GOOGLE_API_KEY: exit %d, %+v", code, c)
	}
}
