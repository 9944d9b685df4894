//go:build realcli

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/claude/claudetest"
)

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
