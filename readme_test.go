package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/claude/claudetest"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/setup"
)

// TestREADMEHelpIsVerbatim keeps the README's usage block equal to what
// `bhw-run --help` prints, exit codes included.
func TestREADMEHelpIsVerbatim(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Main([]string{"bhw-run", "--help"}, &out, &errOut); code != 0 {
		t.Fatalf("--help exit %d: %s", code, errOut.String())
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "## Usage\n\n```\n")
	block, _, ok2 := strings.Cut(rest, "\n```")
	if !ok || !ok2 {
		t.Fatal("README.md has no usage block under ## Usage")
	}
	if got := strings.TrimRight(out.String(), "\n"); got != block {
		t.Fatalf("README's usage block differs from --help; paste this:\n%s", got)
	}
	for _, code := range []string{"64 ", "75 ", "77 ", "78 ", "130/143"} {
		if !strings.Contains(out.String(), code) {
			t.Errorf("--help does not list exit code %s", code)
		}
	}
}

// TestREADMEExitTableIsTheTable keeps the README's exit-code table equal to
// exit.Classes, the table --help and the code use.
func TestREADMEExitTableIsTheTable(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "## Exit codes\n\n")
	if !ok {
		t.Fatal("README.md has no ## Exit codes section")
	}
	table, _, _ := strings.Cut(rest, "\n\n")
	if want := strings.TrimRight(exit.Table(), "\n"); table != want {
		t.Fatalf("README's exit-code table differs from exit.Classes; paste this:\n%s", want)
	}
}

// readmeShellBlocks are the ```sh blocks of the README from "## Set up" to
// "## Usage": the set-up and the try-out a newcomer follows.
func readmeShellBlocks(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n## Set up\n")
	part, _, ok2 := strings.Cut(rest, "\n## Usage\n")
	if !ok || !ok2 {
		t.Fatal("README.md has no ## Set up section before ## Usage")
	}
	var blocks []string
	for {
		_, after, found := strings.Cut(part, "```sh\n")
		if !found {
			break
		}
		block, tail, _ := strings.Cut(after, "```")
		blocks = append(blocks, block)
		part = tail
	}
	return blocks
}

// TestREADMETryOutE2E follows the README's set-up and try-out command by
// command, as a newcomer would paste them: from an empty HOME, on a machine
// with the pinned Claude Code on PATH (what the set-up's npm line installs)
// and no model account, a scripted model behind ANTHROPIC_BASE_URL (the
// API-key variables the set-up names) standing in for it. `make install`
// runs with a PREFIX of the test's; the installed bhw-run is the one on
// PATH. The set-up's doctor must pass, and the try-out must park the
// thread on its first write, run the write once approved, complete the
// turn and stop the thread.
func TestREADMETryOutE2E(t *testing.T) {
	blocks := readmeShellBlocks(t)
	script := "set -e -x\n" + strings.Join(blocks, "\n")
	for _, want := range []string{"make install", "export BLOBHUB_API_URL=file://", "bhw-run doctor", "bhw-run thread new", "bhw-run thread post demo/t1 yes"} {
		if !strings.Contains(script, want) {
			t.Fatalf("the README's set-up and try-out have no %q:\n%s", want, script)
		}
	}
	root := t.TempDir()
	home, prefix, npmBin := filepath.Join(root, "home"), filepath.Join(root, "prefix"), filepath.Join(root, "npm-global", "bin")
	for _, d := range []string{home, npmBin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(claudeBin(t), filepath.Join(npmBin, "claude")); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(home, "demo-repo", "README.md")
	write := claudetest.Tool("Write", map[string]any{"file_path": target, "content": "hello\n"})
	model := claudetest.StartModelServer(write, write, claudetest.Text("I added README.md."))
	defer model.Close()

	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	env := []string{
		"HOME=" + home, "LANG=C.UTF-8", "PREFIX=" + prefix,
		"PATH=" + strings.Join([]string{filepath.Join(prefix, "bin"), npmBin, filepath.Dir(goBin), "/usr/bin", "/bin"}, ":"),
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost", "GOTOOLCHAIN=local",
	}
	// make install builds with the machine's Go: its caches, not the empty
	// HOME's (which would download every module again).
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		out, err := exec.Command(goBin, "env", k).Output()
		if err != nil {
			t.Fatal(err)
		}
		env = append(env, k+"="+strings.TrimSpace(string(out)))
	}
	for _, kv := range model.Env(filepath.Join(home, ".claude")) {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "ANTHROPIC_") || strings.HasPrefix(k, "DISABLE_") || k == "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC" || k == "CLAUDE_CODE_MAX_RETRIES" {
			env = append(env, kv)
		}
	}
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	t.Logf("the README's commands:\n%s", out)
	if err != nil {
		t.Fatalf("a command of the README failed (the last + line above): %v", err)
	}
	text := string(out)
	if regexp.MustCompile(`(?m)^[✗–] `).MatchString(text) {
		t.Errorf("bhw-run doctor found a failure on the README's set-up")
	}
	last := 0
	for _, want := range []string{"demo/t1: parked (exit 0)", "demo/t1: turn_completed (exit 0)", "demo/t1: stopped (exit 0)"} {
		i := strings.Index(text[last:], want)
		if i < 0 {
			t.Fatalf("the try-out did not print %q after what came before", want)
		}
		last += i
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "hello\n" {
		t.Errorf("the approved write: %q, %v", b, err)
	}
	if n := len(model.Requests()); n != 3 {
		t.Errorf("the model got %d requests, want 3 (park; resume and write; done)", n)
	}
	show := exec.Command(filepath.Join(prefix, "bin", "bhw-run"), "thread", "show", "--json", "demo/t1")
	show.Env = append(env, "BLOBHUB_API_URL=file://"+filepath.Join(home, "bhw-store"), "BHW_REVISION_ID=rev_local", "BHW_SESSION_ID=ses_local")
	items, err := show.Output()
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, line := range strings.Split(strings.TrimSpace(string(items)), "\n") {
		var it struct {
			Metadata struct {
				Type     string `json:"type"`
				Decision string `json:"decision"`
				Outcome  string `json:"outcome"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal([]byte(line), &it); err != nil {
			t.Fatalf("thread show --json: %q: %v", line, err)
		}
		m := it.Metadata
		seen = append(seen, strings.TrimRight(m.Type+" "+m.Decision+m.Outcome, " "))
	}
	for _, want := range []string{"pending_prompt", "pending_prompt_resolved approved", "turn_end parked", "turn_end completed"} {
		if !slices.Contains(seen, want) {
			t.Errorf("the thread's items %q lack %q", seen, want)
		}
	}
}

// TestREADMEConfigLoads: the README's config.yaml example, every agent's
// block included, is a config bhw-run accepts.
func TestREADMEConfigLoads(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "## Configuration\n")
	_, rest, ok2 := strings.Cut(rest, "```yaml\n")
	block, _, ok3 := strings.Cut(rest, "\n```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README.md has no yaml block under ## Configuration")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(block), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := setup.Resolve(setup.Options{APIURL: "file://" + dir, StateDir: dir, ConfigPath: cfg, Home: dir, Adapters: adapters}, "")
	if err != nil {
		t.Fatalf("the README's config.yaml: %v", err)
	}
	for _, typ := range []string{"claude_code", "codex", "gemini", "qwen_code", "opencode", "copilot", "acp"} {
		if s.Config.Agents[typ] == nil {
			t.Errorf("the README's config.yaml has no agents.%s block", typ)
		}
	}
}
