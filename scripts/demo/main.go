// Command demo is a newcomer's offline walk-through of bhw-run (`make demo`):
// a thread is handed off, the agent asks to write a file, the run parks on
// the question, a person answers yes, the next run finishes the turn, and a
// stop ends the thread. Every step prints and runs the real command.
//
// Nothing leaves the machine: the threads live in a file:// store in a temp
// folder, and the model is claudetest.ModelServer, a scripted stand-in for
// the Anthropic API on 127.0.0.1. The agent is the real pinned Claude Code
// CLI, driven by the real bin/bhw-run.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/blobhub/bhw-run/claude/claudetest"
)

const (
	alias      = "demo/hello"
	defaultBin = ".tools/node_modules/@anthropic-ai/claude-code-linux-x64/claude"
	bhwRun     = "bin/bhw-run"
)

func main() {
	keep := flag.Bool("keep", false, "keep the temp folder (store, state tree, work folder) and print where it is")
	flag.Parse()
	if err := demo(*keep); err != nil {
		fmt.Fprintf(os.Stderr, "\ndemo: %v\n", err)
		os.Exit(1)
	}
}

// demo holds the walk-through; main only maps its error to an exit status.
func demo(keep bool) error {
	claudeBin := os.Getenv("BHW_CLAUDE_BIN")
	if claudeBin == "" {
		claudeBin = defaultBin
	}
	claudeBin, err := filepath.Abs(claudeBin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(claudeBin); err != nil {
		return fmt.Errorf("the pinned Claude Code CLI is missing (%v); run `make tools` or `make demo`", err)
	}
	if _, err := os.Stat(bhwRun); err != nil {
		return fmt.Errorf("%s is missing (%v); run `make build` from the repository root, or `make demo`", bhwRun, err)
	}
	version, err := exec.Command(claudeBin, "--version").Output()
	if err != nil {
		return fmt.Errorf("%s --version: %v", claudeBin, err)
	}

	tmp, err := os.MkdirTemp("", "bhw-demo-")
	if err != nil {
		return err
	}
	if keep {
		defer fmt.Printf("\nKept everything under %s\n", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	dirs := map[string]string{}
	for _, d := range []string{"store", "state", "work", "claude-config", "home"} {
		dirs[d] = filepath.Join(tmp, d)
		if err := os.MkdirAll(dirs[d], 0o700); err != nil {
			return err
		}
	}
	hello := filepath.Join(dirs["work"], "hello.txt")

	// The stand-in model: it answers the first message with a Write of
	// hello.txt; the run parks on it. The resumed turn brings "A person
	// approved your call…", and the model issues the identical Write, which
	// the one-shot grant lets through; then it says it is done.
	write := claudetest.Tool("Write", map[string]any{"file_path": hello, "content": "hello from the demo\n"})
	model := claudetest.StartModelServer(write, write, claudetest.Text("I wrote hello.txt. Done."))
	defer model.Close()

	config := fmt.Sprintf(`agents:
  claude_code:
    executable: %s
    permissions: approval          # the default: every write is asked
    config_dir: %s
    env:                           # where the agent finds its (stand-in) model
`, claudeBin, dirs["claude-config"])
	for _, kv := range model.Env(dirs["claude-config"]) {
		k, v, _ := strings.Cut(kv, "=")
		if k == "PATH" || k == "HOME" || k == "CLAUDE_CONFIG_DIR" {
			continue
		}
		config += fmt.Sprintf("      %s: %q\n", k, v)
	}
	cfgPath := filepath.Join(tmp, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		return err
	}

	env := map[string]string{
		"BLOBHUB_API_URL": "file://" + dirs["store"],
		"BHW_REVISION_ID": "rev_demo",
		"BHW_SESSION_ID":  "ses_demo",
		"BHW_STATE_DIR":   dirs["state"],
		"BHW_CONFIG":      cfgPath,
		"HOME":            dirs["home"],
	}
	envOrder := []string{"BLOBHUB_API_URL", "BHW_REVISION_ID", "BHW_SESSION_ID", "BHW_STATE_DIR", "BHW_CONFIG", "HOME"}

	fmt.Printf(`bhw-run demo — offline, nothing leaves this machine.

  • The model is a SCRIPTED STAND-IN: a fake Anthropic API on %s that asks to
    write hello.txt, writes it once a person approves, then says it is done.
    It does not think; it plays three canned replies.
  • The agent is the REAL pinned Claude Code CLI %s  (%s)
  • bhw-run is the real %s; threads live in a local file:// store.

Everything goes under %s. The commands below run with:
`, model.URL, strings.TrimSpace(string(version)), claudeBin, bhwRun, tmp)
	for _, k := range envOrder {
		fmt.Printf("  export %s=%s\n", k, env[k])
	}
	fmt.Printf("\nand this config.yaml ($BHW_CONFIG):\n\n%s\n", indent(config))

	sh := &shell{env: env}
	steps := []struct {
		say  string
		args []string
		exit int
		then func() error
	}{
		{say: "A person hands off a task: a new thread, state pending, with a first message.",
			args: []string{"thread", "new", "--work-folder", dirs["work"], "--message", "Please write hello.txt saying hello.", alias}},
		{say: "The scheduler (cron, systemd, CI, you) runs one activation. The agent wants to Write;\n" +
			"under the approval posture bhw-run posts a question and parks: exit 0, nothing written.",
			args: []string{alias}, then: func() error { return absent(hello) }},
		{say: "The thread now shows the agent's items and the ❓ pending_prompt.",
			args: []string{"thread", "show", alias}},
		{say: "Nothing new for the agent: a run stays parked and does not even start the CLI.",
			args: []string{alias}, then: func() error { return requests(model, 1) }},
		{say: "The person answers the question.",
			args: []string{"thread", "post", alias, "yes"}},
		{say: "The next run resumes the same Claude session with the answer; the approved Write runs\n" +
			"once under a one-shot grant, and the turn completes.",
			args: []string{alias}, then: func() error { return shown(hello) }},
		{say: "The thread: the Write's result, ✓ approved, the agent's last words and the turn end.",
			args: []string{"thread", "show", alias}},
		{say: "The person stops the thread …",
			args: []string{"thread", "stop", alias}},
		{say: "… and the next run winds it down locally: outcome stopped.",
			args: []string{alias}},
	}
	for i, st := range steps {
		fmt.Printf("── step %d ─────────────────────────────────────────────\n%s\n\n", i+1, st.say)
		if err := sh.run(st.exit, st.args...); err != nil {
			return err
		}
		if st.then != nil {
			if err := st.then(); err != nil {
				return err
			}
		}
		fmt.Println()
	}
	n := len(model.Requests())
	fmt.Printf("Done. The stand-in model got %d requests (park, then resume and finish).\n", n)
	if n != 3 {
		return fmt.Errorf("the model got %d requests, want 3", n)
	}
	return nil
}

// shell runs bin/bhw-run with the demo's environment and shows what it does.
type shell struct{ env map[string]string }

func (s *shell) run(wantExit int, args ...string) error {
	fmt.Printf("$ %s %s\n", bhwRun, quote(args))
	cmd := exec.Command(bhwRun, append([]string{"--log-format=text", "-q"}, args...)...)
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, ours := s.env[k]; ours || strings.HasPrefix(k, "BLOBHUB_") || strings.HasPrefix(k, "BHW_") {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	for k, v := range s.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	fmt.Print(indent(out.String()))
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		return err
	}
	fmt.Printf("  (exit %d)\n", code)
	if code != wantExit {
		return fmt.Errorf("%s %s exited %d, want %d", bhwRun, quote(args), code, wantExit)
	}
	return nil
}

// requests checks the stand-in model's request count: a parked run that
// starts no CLI asks the model nothing.
func requests(m *claudetest.ModelServer, want int) error {
	if n := len(m.Requests()); n != want {
		return fmt.Errorf("the model got %d requests so far, want %d", n, want)
	}
	fmt.Printf("  (the stand-in model still has %d request: the parked run asked it nothing)\n", want)
	return nil
}

func absent(p string) error {
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s exists before anyone approved the write (%v)", p, err)
	}
	fmt.Printf("$ ls %s\n  (not there: the write waits for a person)\n", filepath.Base(p))
	return nil
}

func shown(p string) error {
	b, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("after the approval: %v", err)
	}
	fmt.Printf("$ cat %s\n%s", filepath.Base(p), indent(string(b)))
	return nil
}

func quote(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t'\"$`\\*?!;&|<>()") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ") + "\n"
}
