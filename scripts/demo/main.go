// Command demo is a newcomer's offline walk-through of bhw-run (`make demo`,
// or `make demo AGENT=gemini` and the other agent types): a thread is
// handed off, the agent asks to write a file, the run parks on the
// question, a person answers yes, the next run finishes the turn, and a
// stop ends the thread. Every step prints and runs the real command.
//
// Nothing leaves the machine: the threads live in a file:// store in a temp
// folder, and the model is a scripted stand-in on 127.0.0.1
// (claudetest.ModelServer for Claude Code; for the ACP agents a Gemini API
// or an OpenAI chat-completions fake from acp/acptest, which reads its
// script from the message). The agent is the real pinned CLI, driven by
// the real bin/bhw-run. With -serve it only keeps the stand-in model for
// Claude Code up, for the walkthrough a person types by hand (serve.go).
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/blobhub/bhw-run/acp/acptest"
	"github.com/blobhub/bhw-run/claude/claudetest"
)

const (
	alias      = "demo/hello"
	defaultBin = ".tools/node_modules/@anthropic-ai/claude-code-linux-x64/claude"
	bhwRun     = "bin/bhw-run"
)

func main() {
	keep := flag.Bool("keep", false, "keep the temp folder (store, state tree, work folder) and print where it is")
	agentType := flag.String("agent", "claude_code", "the agent type: claude_code, gemini, qwen_code, opencode or copilot")
	serveOnly := flag.Bool("serve", false, "only keep the stand-in model for Claude Code up, and print the exports that point the CLI at it (make model)")
	port := flag.Int("port", 0, "with -serve: the port on 127.0.0.1 (0: a free one at each start)")
	flag.Parse()
	run := func() error { return demo(*keep, *agentType) }
	if *serveOnly {
		run = func() error { return serve(*port) }
	}
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "\ndemo: %v\n", err)
		os.Exit(1)
	}
}

// stage is the agent's side of the demo: the stand-in model, the
// config.yaml, what bhw-run's environment adds, the first message.
type stage struct {
	name, version, bin, modelURL string
	config                       string
	env                          map[string]string
	message                      string
	requests                     func() int // the stand-in model's scripted requests so far
	close                        func()
}

// demo holds the walk-through; main only maps its error to an exit status.
func demo(keep bool, agentType string) error {
	if _, err := os.Stat(bhwRun); err != nil {
		return fmt.Errorf("%s is missing (%v); run `make build` from the repository root, or `make demo`", bhwRun, err)
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
	var st *stage
	if agentType == "claude_code" {
		st, err = claudeStage(dirs, hello)
	} else {
		st, err = acpStage(agentType, hello)
	}
	if err != nil {
		return err
	}
	defer st.close()
	config := st.config
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
	var extra []string
	for k, v := range st.env {
		env[k] = v
		extra = append(extra, k)
	}
	sort.Strings(extra)
	envOrder = append(envOrder, extra...)

	fmt.Printf(`bhw-run demo — offline, nothing leaves this machine.

  • The model is a SCRIPTED STAND-IN on %s that asks to write hello.txt,
    writes it once a person approves, then says it is done. It does not
    think; it plays canned replies.
  • The agent is the REAL pinned %s %s  (%s)
  • bhw-run is the real %s; threads live in a local file:// store.

Everything goes under %s. The commands below run with:
`, st.modelURL, st.name, st.version, st.bin, bhwRun, tmp)
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
			args: []string{"thread", "new", "--work-folder", dirs["work"], "--agent", agentType, "--message", st.message, alias}},
		{say: "The scheduler (cron, systemd, CI, you) runs one activation. The agent wants to Write;\n" +
			"under the approval posture bhw-run posts a question and parks: exit 0, nothing written.",
			args: []string{alias}, then: func() error { return absent(hello) }},
		{say: "The thread now shows the agent's items and the ❓ pending_prompt.",
			args: []string{"thread", "show", alias}},
		{say: "Nothing new for the agent: a run stays parked and does not even start the CLI.",
			args: []string{alias}, then: func() error { return requests(st.requests, 1) }},
		{say: "The person answers the question.",
			args: []string{"thread", "post", alias, "yes"}},
		{say: "The next run resumes the same agent session with the answer; the approved write runs\n" +
			"once under a one-shot grant, and the turn completes." + resumeNote(agentType),
			args: []string{alias}, then: func() error { return shown(hello) }},
		{say: "The thread: the write's result, ✓ approved, the agent's last words and the turn end.",
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
	n := st.requests()
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
func requests(count func() int, want int) error {
	if n := count(); n != want {
		return fmt.Errorf("the model got %d requests so far, want %d", n, want)
	}
	fmt.Printf("  (the stand-in model still has %d request: the parked run asked it nothing)\n", want)
	return nil
}

// resumeNote says what the resume of a Gemini CLI session waits for.
func resumeNote(agentType string) string {
	if agentType == "gemini" {
		return "\n(Gemini CLI: a session is never loaded in the UTC minute it was created in, so\n" +
			"this run may first wait up to a minute for the minute to turn.)"
	}
	return ""
}

// claudeStage is the Claude Code side: the stand-in Anthropic API answers
// the first message with a Write of hello.txt (the run parks on it); the
// resumed turn brings "A person approved your call…", the model issues the
// identical Write, which the one-shot grant lets through, then it is done.
func claudeStage(dirs map[string]string, hello string) (*stage, error) {
	bin := os.Getenv("BHW_CLAUDE_BIN")
	if bin == "" {
		bin = defaultBin
	}
	bin, err := filepath.Abs(bin)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("the pinned Claude Code CLI is missing (%v); run `make tools` or `make demo`", err)
	}
	version, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --version: %v", bin, err)
	}
	write := claudetest.Tool("Write", map[string]any{"file_path": hello, "content": "hello from the demo\n"})
	model := claudetest.StartModelServer(write, write, claudetest.Text("I wrote hello.txt. Done."))
	config := fmt.Sprintf(`agents:
  claude_code:
    executable: %s
    permissions: approval          # the default: every write is asked
    config_dir: %s
    env:                           # where the agent finds its (stand-in) model
`, bin, dirs["claude-config"])
	for _, kv := range model.Env(dirs["claude-config"]) {
		k, v, _ := strings.Cut(kv, "=")
		if k == "PATH" || k == "HOME" || k == "CLAUDE_CONFIG_DIR" {
			continue
		}
		config += fmt.Sprintf("      %s: %q\n", k, v)
	}
	return &stage{name: "Claude Code CLI", version: strings.TrimSpace(string(version)), bin: bin, modelURL: model.URL,
		config: config, message: "Please write hello.txt saying hello.",
		requests: func() int { return len(model.Requests()) }, close: model.Close}, nil
}

// acpStage is an ACP agent's side: the stand-in model reads its script
// from the message (the <<tool …>> marker asks for the write), and on "A
// person approved your call…" it issues its own call from the history
// again. The API key and endpoint go in bhw-run's environment: they reach
// the agent through its allowlisted prefixes.
func acpStage(agentType, hello string) (*stage, error) {
	a := acptest.ByType(agentType)
	if a == nil {
		return nil, fmt.Errorf("agent type %q: use claude_code, gemini, qwen_code, opencode or copilot", agentType)
	}
	bin := os.Getenv(a.BinEnv)
	if bin == "" {
		bin = a.PinnedRel
	}
	bin, err := filepath.Abs(bin)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("the pinned %s CLI is missing (%v); run `make tools` or `make demo AGENT=%s`", agentType, err, agentType)
	}
	fake, stop := a.StartFake()
	s := a.SetupWith(fake.BaseURL(), os.Getenv("BHW_COPILOT_CACHE"))
	block := map[string]any{"executable": bin, "permissions": "approval"}
	if s.Model != "" {
		block["model"] = s.Model
	}
	for k, v := range s.Own {
		block[k] = v
	}
	b, err := yaml.Marshal(map[string]any{"agents": map[string]any{agentType: block}})
	if err != nil {
		stop()
		return nil, err
	}
	return &stage{name: agentType, version: a.Version, bin: bin, modelURL: fake.BaseURL(),
		config: "# every write is asked (approval, the default); the agent's home is the thread's own\n" + string(b),
		env:    s.Env, message: "Please write hello.txt saying hello. " + a.Write(hello, "hello from the demo\n"),
		requests: func() int { return len(fake.ModelRequests()) }, close: stop}, nil
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
