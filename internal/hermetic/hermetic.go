// Package hermetic keeps a test binary off the machine of the person who
// runs it: the agent CLIs they installed, their HOME (and the logins in
// it) and the keys in their environment. A test that needs an agent names
// its binary (BHW_CLAUDE_BIN and the like) or a fake, a HOME of its own,
// and the keys it means; everything else it would otherwise find by
// accident is taken away here, once, in TestMain. Without it a test that
// expects "agent not installed" passes on a bare CI machine and fails on
// the laptop of someone who followed the README.
package hermetic

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// AgentCommands are the executable names the agent adapters look up on
// PATH (agent.Adapter.Executable); e2e's TestHermeticCoversEveryAdapter
// keeps the list whole.
var AgentCommands = []string{
	"claude", "codex", "gemini", "qwen", "opencode", "copilot", "acp-agent", "antigravity", "agy",
}

// loginPrefixes are the environment variables that carry a login or point
// an agent or bhw-run at the user's own account or files.
var loginPrefixes = []string{
	"ANTHROPIC_", "CLAUDE_", "OPENAI_", "CODEX_", "GEMINI_", "GOOGLE_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS",
	"QWEN_", "DASHSCOPE_", "OPENCODE_", "COPILOT_", "GH_TOKEN", "GITHUB_TOKEN", "BLOBHUB_",
	"XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME",
}

// userFlags are bhw-run's own flag variables (cli's global flags): a value
// the user exported for their own runs must not steer a test's.
var userFlags = []string{
	"BHW_STATE_DIR", "BHW_CONFIG", "BHW_SECTION", "BHW_REVISION_ID", "BHW_SESSION_ID", "BHW_LOCK_WAIT",
	"BHW_SLOT_WAIT", "BHW_MAX_DURATION", "BHW_STALL_TIMEOUT", "BHW_LOG_FORMAT",
}

// Isolate gives the process a HOME of its own, a PATH on which no agent
// CLI is found, and an environment without the user's logins, keeping
// Go's own caches where they were (so a `go build` inside a test is not a
// cold one). Call it at the top of TestMain, after any "run as a fake"
// hook, and call the returned func after m.Run.
func Isolate() (cleanup func(), err error) {
	root, err := os.MkdirTemp("", "bhw-run-hermetic-")
	if err != nil {
		return nil, fmt.Errorf("hermetic: %w", err)
	}
	cleanup = func() { _ = os.RemoveAll(root) }
	if err := isolate(root); err != nil {
		cleanup()
		return nil, err
	}
	return cleanup, nil
}

// Main is TestMain's whole body for a package with nothing else to do:
// Isolate, run, clean up, exit.
func Main(run func() int) {
	cleanup, err := Isolate()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := run()
	cleanup()
	os.Exit(code)
}

func isolate(root string) error {
	if err := pinGo(); err != nil {
		return err
	}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if slices.Contains(userFlags, k) || slices.ContainsFunc(loginPrefixes, func(p string) bool { return strings.HasPrefix(k, p) }) {
			_ = os.Unsetenv(k)
		}
	}
	home := filepath.Join(root, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return fmt.Errorf("hermetic: %w", err)
	}
	_ = os.Setenv("HOME", home)
	path, err := AgentFreePath(os.Getenv("PATH"), filepath.Join(root, "path"))
	if err != nil {
		return err
	}
	return os.Setenv("PATH", path)
}

// pinGo sets Go's own folders (its build and module caches, GOPATH and
// its settings file) explicitly, as go reports them under the user's
// HOME, so that moving HOME leaves the go command where it was.
func pinGo() error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		// No go command on PATH: no test of this process runs one.
		return nil
	}
	out, err := exec.Command(goBin, "env", "-json", "GOCACHE", "GOMODCACHE", "GOPATH", "GOENV").Output()
	if err != nil {
		return fmt.Errorf("hermetic: go env: %w", err)
	}
	var vars map[string]string
	if err := json.Unmarshal(out, &vars); err != nil {
		return fmt.Errorf("hermetic: go env: %w", err)
	}
	for k, v := range vars {
		if v != "" && os.Getenv(k) == "" {
			_ = os.Setenv(k, v)
		}
	}
	return nil
}

// AgentFreePath is path with every folder that holds one of
// AgentCommands replaced by a folder under shadowRoot that links to all of
// that folder's other entries: node, git and sh stay found where npm put
// claude beside them, and no agent is.
func AgentFreePath(path, shadowRoot string) (string, error) {
	var out []string
	for i, dir := range filepath.SplitList(path) {
		if dir == "" || !holdsAgent(dir) {
			out = append(out, dir)
			continue
		}
		shadow := filepath.Join(shadowRoot, fmt.Sprint(i))
		if err := os.MkdirAll(shadow, 0o700); err != nil {
			return "", fmt.Errorf("hermetic: %w", err)
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue // an unreadable PATH folder finds nothing anyway
		}
		for _, e := range entries {
			if slices.Contains(AgentCommands, e.Name()) {
				continue
			}
			if err := os.Symlink(filepath.Join(dir, e.Name()), filepath.Join(shadow, e.Name())); err != nil {
				return "", fmt.Errorf("hermetic: %w", err)
			}
		}
		out = append(out, shadow)
	}
	return strings.Join(out, string(os.PathListSeparator)), nil
}

func holdsAgent(dir string) bool {
	for _, name := range AgentCommands {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}
