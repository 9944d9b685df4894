package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/lock"
	"github.com/blobhub/bhw-run/setup"
)

// TestDoctorBeforeBlobHub: doctor on a machine with no BlobHub credentials
// yet still checks what does not need them — the agents, and the config
// when --config names it — ends with a summary line of its own (not a log
// record), and never says "fix: fix". On a local store without a session,
// its fix says any ids will do.
func TestDoctorBeforeBlobHub(t *testing.T) {
	e := newE2E(t)
	cfg := filepath.Join(e.root, "config.yaml")
	if err := os.WriteFile(cfg, []byte("agents:\n  claude_code:\n    executable: /nonexistent/claude\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	doctor := func(env ...string) (int, string, string) {
		t.Helper()
		cmd := exec.Command(bhwBin, "doctor")
		cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=" + e.home, "LANG=C.UTF-8", "BHW_LOG_FORMAT=json"}, env...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		t.Logf("doctor %v → exit %d\n%s%s", env, code, stdout.String(), stderr.String())
		return code, stdout.String(), stderr.String()
	}

	code, out, _ := doctor("BHW_CONFIG=" + cfg)
	if code != 78 {
		t.Errorf("exit %d, want 78", code)
	}
	for _, want := range []string{"✗ credentials: CREDENTIALS_NOT_FOUND", "✓ config: " + cfg + " parses", "✗ agent claude_code: AGENT_NOT_INSTALLED", "/nonexistent/claude"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor without credentials: no %q", want)
		}
	}
	if strings.Contains(out, "fix: fix") {
		t.Errorf("a fix says fix twice:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if last := lines[len(lines)-1]; !regexp.MustCompile(`^✗ doctor: \d+ of \d+ checks failed, \d+ not checked; fix what they say`).MatchString(last) {
		t.Errorf("the last line %q is not the summary", last)
	}

	// Without --config the config's folder is the profile's: the agents
	// are checked all the same, with the defaults.
	_, out, _ = doctor()
	if !strings.Contains(out, "– config: not checked") || !strings.Contains(out, "agent claude_code: AGENT_NOT_INSTALLED") {
		t.Errorf("doctor without credentials or --config did not check the agents:\n%s", out)
	}

	_, out, _ = doctor("BLOBHUB_API_URL=file://" + filepath.Join(e.root, "store"))
	if line := lineWith(out, "section:"); !strings.Contains(line, "any ids will do") {
		t.Errorf("the section's fix on a local store: %q", line)
	}
}

// TestErrorsPrintOnceAtATerminalE2E: at a terminal an outcome is one line
// for a person: a refused command's error is one "bhw-run: …" line, not a
// log record; a run's error stands only in its summary line; a run that
// goes well prints no INFO record about the agent's start; and the records
// that remain (a warning) carry a 24-hour clock.
func TestErrorsPrintOnceAtATerminalE2E(t *testing.T) {
	e := pipelineEnv(t)
	env := append(e.environ(""), "PATH="+filepath.Dir(bhwBin)+":"+os.Getenv("PATH"), "BHW_LOG_FORMAT=auto")
	tm := newTmux(t, env)

	tm.typeLine(`bhw-run thread new --work-folder rel --message hi once/t1; echo "new-exit=$?"`)
	s := plain(tm.waitFor("thread new refused", func(s string) bool { return exited("new", s) }))
	if n := strings.Count(s, "WORK_FOLDER_NOT_ABSOLUTE"); n != 1 || !strings.Contains(lineWith(s, "WORK_FOLDER_NOT_ABSOLUTE"), "bhw-run: ") || strings.Contains(s, "ERR") {
		t.Errorf("the refusal printed %d times, or as a record, want one bhw-run: line:\n%s", n, s)
	}
	if !strings.Contains(s, "new-exit=64") {
		t.Errorf("thread new with a relative folder: want exit 64:\n%s", s)
	}

	missing := filepath.Join(e.root, "not-here")
	tm.typeLine(`bhw-run thread new --work-folder ` + missing + ` --agent claude_code --message hi once/t2 && bhw-run once/t2; echo "run-exit=$?"`)
	s = plain(tm.waitFor("the run", func(s string) bool { return exited("run", s) }))
	s = s[strings.Index(s, "once/t2; echo"):]
	warn := lineWith(s, "does not exist on this machine")
	if !regexp.MustCompile(`^\d\d:\d\d:\d\d WRN `).MatchString(strings.TrimSpace(warn)) {
		t.Errorf("the warning %q does not start with a 24-hour time", warn)
	}
	if strings.Contains(s, "claude started") || regexp.MustCompile(`\d(AM|PM) `).MatchString(s) {
		t.Errorf("an INFO record of the agent's start, or a 12-hour clock, at a terminal:\n%s", s)
	}

	tm.typeLine(`bhw-run once/none; echo "none-exit=$?"`)
	s = plain(tm.waitFor("the run of a thread that does not exist", func(s string) bool { return exited("none", s) }))
	s = s[strings.Index(s, "once/none; echo"):]
	if n := strings.Count(s, "THREAD_NOT_FOUND"); n != 1 || strings.Contains(s, "ERR") || !strings.Contains(s, "once/none: error (exit 66) THREAD_NOT_FOUND") {
		t.Errorf("the run's error printed %d times, want once in its summary line:\n%s", n, s)
	}
}

// TestLockWaitExpirySaysItWaited: a run that waited --lock-wait for a held
// thread lock and gave up says it waited, and for how long (75).
func TestLockWaitExpirySaysItWaited(t *testing.T) {
	e := pipelineEnv(t)
	const alias = "wait/t1"
	e.handOff(alias, claudeType, "", "hello")
	dir := setup.ThreadDir(e.jobDir(), alias)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	held, err := lock.Acquire(context.Background(), filepath.Join(dir, "thread.lock"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock()
	code, stdout, _ := e.run("--lock-wait", "300ms", alias)
	if code != 75 || !strings.Contains(stdout, "THREAD_LOCKED") || !strings.Contains(stdout, "waited 300ms for it (--lock-wait)") {
		t.Errorf("exit %d, want 75 THREAD_LOCKED saying it waited 300ms:\n%s", code, stdout)
	}
}

// TestDocsInstallTheTestedVersions: every install line of the agents
// table in docs/usage.md and the README pins the version the Makefile
// tests with, Claude Code's login is the pinned CLI's own command, and the
// README says what bash needs to load the completions.
func TestDocsInstallTheTestedVersions(t *testing.T) {
	mk, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	pin := func(name string) string {
		m := regexp.MustCompile(`(?m)^` + name + `_VERSION\s*:=\s*(\S+)`).FindSubmatch(mk)
		if m == nil {
			t.Fatalf("the Makefile pins no %s_VERSION", name)
		}
		return string(m[1])
	}
	usage, err := os.ReadFile(filepath.Join("docs", "usage.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for pkg, name := range map[string]string{"@anthropic-ai/claude-code": "CLAUDE", "@openai/codex": "CODEX", "@google/gemini-cli": "GEMINI",
		"@qwen-code/qwen-code": "QWEN", "opencode-ai": "OPENCODE", "@github/copilot": "COPILOT"} {
		want := "npm i -g " + pkg + "@" + pin(name) + "`"
		if !strings.Contains(string(usage), want) {
			t.Errorf("docs/usage.md's agents table has no %q", want)
		}
		if unpinned := "npm i -g " + pkg + "`"; strings.Contains(string(usage), unpinned) {
			t.Errorf("docs/usage.md installs %s unpinned", pkg)
		}
	}
	for _, doc := range [][]byte{usage, readme} {
		if !strings.Contains(string(doc), "`claude auth login`") || strings.Contains(string(doc), "`claude login`") {
			t.Errorf("an agents table does not log Claude Code in with `claude auth login` (what 2.1.332 has)")
		}
	}
	if !strings.Contains(string(readme), "bash-completion") || !strings.Contains(string(readme), "source <(bhw-run completion bash)") {
		t.Errorf("the README does not say bash needs bash-completion (or source <(bhw-run completion bash)) for the completions")
	}
}
