package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/internal/sysdeps"
)

// script writes `bhw-run completion <shell>` to a file and returns its path.
func script(t *testing.T, shell string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := Main([]string{"bhw-run", "completion", shell}, &out, &errOut, "", adapters); code != 0 {
		t.Fatalf("completion %s: exit %d: %s", shell, code, errOut.String())
	}
	p := filepath.Join(t.TempDir(), "bhw-run."+shell)
	if err := os.WriteFile(p, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func runShell(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(sysdeps.Path(t, name), args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir(), "LANG=C.UTF-8"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %q: %v\n%s", name, args, err, out)
	}
	return string(out)
}

// TestCompletionScriptsParse: each script is valid for its shell.
func TestCompletionScriptsParse(t *testing.T) {
	for _, shell := range shells {
		runShell(t, shell, "-n", script(t, shell))
	}
	var out, errOut bytes.Buffer
	if code := Main([]string{"bhw-run", "completion", "tcsh"}, &out, &errOut, "", adapters); code != exit.Usage {
		t.Errorf("completion tcsh: exit %d, want %d", code, exit.Usage)
	}
}

// bashComplete is what the bash script offers for words, the last being
// the word under the cursor.
func bashComplete(t *testing.T, path string, words ...string) []string {
	t.Helper()
	out := runShell(t, "bash", append([]string{"-c", `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($#-1)); _bhw_run; printf '%s\n' "${COMPREPLY[@]}"`, "_", path}, words...)...)
	return strings.Fields(out)
}

// TestCompletionBash completes commands, subcommands, flags of the command
// and the global ones, flag values, and nothing after an alias; and at
// every command path it offers exactly the subcommands the CLI defines.
func TestCompletionBash(t *testing.T) {
	p := script(t, "bash")
	for _, tc := range []struct {
		words []string
		want  []string
	}{
		{[]string{"bhw-run", "thr"}, []string{"thread"}},
		{[]string{"bhw-run", "do"}, []string{"doctor"}},
		{[]string{"bhw-run", "thread", "n"}, []string{"new"}},
		{[]string{"bhw-run", "-v", "--state-dir", "/x", "thread", "s"}, []string{"show", "stop"}},
		{[]string{"bhw-run", "thread", "new", "--wo"}, []string{"--work-folder"}},
		{[]string{"bhw-run", "thread", "new", "--js"}, []string{"--json"}},
		{[]string{"bhw-run", "ls", "--r"}, []string{"--runnable", "--revision"}},
		{[]string{"bhw-run", "--log-format", ""}, []string{"auto", "text", "json"}},
		{[]string{"bhw-run", "thread", "new", "--agent", ""}, []string{"claude_code", "codex", "gemini", "qwen_code", "opencode", "copilot", "acp", "antigravity"}},
		{[]string{"bhw-run", "completion", ""}, []string{"bash", "zsh", "fish"}},
		{[]string{"bhw-run", "demo/t1", ""}, nil},
		{[]string{"bhw-run", "run", "--", "th"}, nil},
	} {
		if got := bashComplete(t, p, tc.words...); !slices.Equal(got, tc.want) {
			t.Errorf("%q: bash offers %q, want %q", tc.words, got, tc.want)
		}
	}
	cl := &cliState{adapters: adapters}
	for _, n := range cl.completionTree(cl.definitions()) {
		if len(n.Subs) == 0 {
			continue
		}
		words := append([]string{"bhw-run"}, strings.Fields(n.Path)...)
		got := bashComplete(t, p, append(words, "")...)
		want := append(strings.Fields(names(n.Subs)), n.Args...)
		if !slices.Equal(got, want) {
			t.Errorf("%q: bash offers %q, want the definitions' %q", words, got, want)
		}
	}
}

// TestCompletionZsh runs the zsh function with zsh's completion builtins
// stood in for by ones that print what they are given.
func TestCompletionZsh(t *testing.T) {
	p := script(t, "zsh")
	complete := func(words ...string) []string {
		t.Helper()
		stubs := `compdef() { :; }; _describe() { local n=${@[-1]}; print -l -- ${(P)n}; }; ` +
			`compadd() { [[ $1 == -a ]] && print -l -- ${(P)2}; }; _files() { print FILES; }; `
		out := runShell(t, "zsh", append([]string{"-f", "-c", stubs + `source "$1"; shift; words=("$@"); CURRENT=$#; _bhw_run`, "_", p}, words...)...)
		return strings.Split(strings.TrimSpace(out), "\n")
	}
	hasEntry := func(got []string, flag string) bool {
		return slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, flag+":") && len(s) > len(flag)+1 })
	}
	if got := complete("bhw-run", "thread", ""); !hasEntry(got, "new") || !hasEntry(got, "edit") {
		t.Errorf("zsh after `thread`: %q, want new with its usage", got)
	}
	if got := complete("bhw-run", "thread", "new", "--"); !hasEntry(got, "--work-folder") || !hasEntry(got, "--api-url") {
		t.Errorf("zsh flags of thread new: %q, want its own and the global ones", got)
	}
	if got := complete("bhw-run", "--log-format", ""); !slices.Equal(got, []string{"auto", "text", "json"}) {
		t.Errorf("zsh --log-format values: %q", got)
	}
	if got := complete("bhw-run", "--config", ""); !slices.Equal(got, []string{"FILES"}) {
		t.Errorf("zsh --config value: %q, want files", got)
	}
}

// TestCompletionFish asks fish itself what it completes.
func TestCompletionFish(t *testing.T) {
	p := script(t, "fish")
	complete := func(line string) []string {
		t.Helper()
		out := runShell(t, "fish", "--no-config", "-c", `source $argv[1]; complete -C $argv[2]`, p, line)
		var got []string
		for l := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
			word, _, _ := strings.Cut(l, "\t")
			if word != "" {
				got = append(got, word)
			}
		}
		return got
	}
	for line, want := range map[string][]string{
		"bhw-run thr":                     {"thread"},
		"bhw-run thread n":                {"new"},
		"bhw-run -q thread new --wo":      {"--work-folder"},
		"bhw-run thread new --agent ":     {"claude_code", "codex", "gemini", "qwen_code", "opencode", "copilot", "acp", "antigravity"},
		"bhw-run --log-format json do":    {"doctor"},
		"bhw-run demo/t1 th":              nil,
		"bhw-run ls --state ":             {"active", "completed", "failed", "none", "pending"},
		"bhw-run policy explain --effect": {"--effect"},
	} {
		got := complete(line)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%q: fish offers %q, want %q", line, got, want)
		}
	}
}

// TestManPage: the man page renders with man(1) and groff without a
// warning, and holds every command, the global flags and the exit codes.
func TestManPage(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Main([]string{"bhw-run", "man"}, &out, &errOut, "", adapters); code != 0 {
		t.Fatalf("man: exit %d: %s", code, errOut.String())
	}
	page := filepath.Join(t.TempDir(), "bhw-run.1")
	if err := os.WriteFile(page, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sysdeps.Path(t, "groff"), "-man", "-Tutf8", "-ww", "-z", page)
	if b, err := cmd.CombinedOutput(); err != nil || len(b) > 0 {
		t.Errorf("groff warns: %v\n%s", err, b)
	}
	man := exec.Command(sysdeps.Path(t, "man"), "-l", page)
	man.Env = []string{"PATH=/usr/bin:/bin", "MANPAGER=cat", "PAGER=cat", "MANWIDTH=100", "LANG=C.UTF-8"}
	var text, warn bytes.Buffer
	man.Stdout, man.Stderr = &text, &warn
	if err := man.Run(); err != nil || warn.Len() > 0 {
		t.Fatalf("man -l: %v\n%s", err, warn.String())
	}
	rendered := text.String()
	for _, want := range []string{"bhw-run(1)", "NAME", "SYNOPSIS", "GLOBAL OPTIONS", "EXIT CODES", "--state-dir", "doctor", "completion", "thread", "--work-folder", "78", "130 / 143", "credentials.yaml"} {
		if !strings.Contains(rendered, want) {
			t.Errorf("the man page lacks %q", want)
		}
	}
}
