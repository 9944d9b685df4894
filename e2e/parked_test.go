package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/claude/claudetest"
	"github.com/blobhub/bhw-run/policy"
)

// TestParkedAtATerminalE2E: a run that parks on a person tells the person
// at the terminal how to answer; the question lists every reply that
// approves (none of them is "anything else"); and ls shows the thread as
// waiting until the answer comes, then active and runnable.
func TestParkedAtATerminalE2E(t *testing.T) {
	e := newE2E(t)
	e.useFileStore()
	write := &claudetest.FakeTool{Name: "Write", Input: map[string]any{"file_path": filepath.Join(e.work, "x.txt"), "content": "hi"}, Result: "File created"}
	e.fakeClaude([]claudetest.FakeStep{{Permission: write}, {Text: "written"}})
	const alias = "park/t1"
	e.handOff(alias, claudeType, "", "write x.txt")

	env := append(e.environ(""), "PATH="+filepath.Dir(bhwBin)+":"+os.Getenv("PATH"), "BHW_LOG_FORMAT=auto")
	tm := newTmux(t, env)
	tm.typeLine(`bhw-run ` + alias + `; echo "run-exit=$?"`)
	s := plain(tm.waitFor("the parked run", func(s string) bool { return exited("run", s) }))
	if !strings.Contains(s, alias+": parked (exit 0)") || !strings.Contains(s, "run-exit=0") {
		t.Fatalf("the run did not park:\n%s", s)
	}
	hint := lineWith(s, "waits for a person")
	for _, want := range []string{"bhw-run thread show " + alias, "bhw-run thread post " + alias + " yes", "then run `bhw-run " + alias + "`"} {
		if !strings.Contains(hint, want) {
			t.Errorf("the hint after parking %q lacks %q", hint, want)
		}
	}

	tm.typeLine(`bhw-run ls; echo "ls-exit=$?"`)
	s = plain(tm.waitFor("ls", func(s string) bool { return exited("ls", s) }))
	if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(alias) + `\s+waiting\s*$`).MatchString(s) {
		t.Errorf("ls does not show the parked thread as waiting:\n%s", s)
	}

	code, out, _ := e.run("thread", "show", alias)
	if code != 0 {
		t.Fatalf("thread show: exit %d", code)
	}
	prompt := out[strings.Index(out, "❓"):]
	if strings.Contains(prompt, "anything else") {
		t.Errorf("the prompt says anything else denies:\n%s", prompt)
	}
	for _, r := range policy.ApprovalReplies {
		if ok, _ := policy.ParseApproval(r); !ok || !regexp.MustCompile(`\b`+regexp.QuoteMeta(r)+`\b`).MatchString(lineWith(prompt, "to approve")) {
			t.Errorf("the prompt's rule does not list %q, which approves (%v):\n%s", r, ok, prompt)
		}
	}

	e.asPerson("thread", "post", alias, "OK")
	code, out, _ = e.run("ls")
	if code != 0 || !strings.Contains(out, alias+"\tactive") {
		t.Errorf("ls after the answer: exit %d, want the thread active:\n%s", code, out)
	}
}
