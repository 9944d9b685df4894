package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommonMistakesNameTheirFix: the mistakes a newcomer makes get as
// much help as a mistyped flag — the exit code, and a message that says
// what was most likely meant.
func TestCommonMistakesNameTheirFix(t *testing.T) {
	e := newE2E(t)
	e.useFileStore()
	e.writeConfig()
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		exit int
		want []string
		not  []string
	}{
		{"agent claude", []string{"thread", "new", "--work-folder", e.work, "--agent", "claude", "--message", "hi", "m/a1"}, 64,
			[]string{"AGENT_TYPE_UNSUPPORTED", "did you mean --agent claude_code?"}, nil},
		{"agent claude-code", []string{"thread", "new", "--work-folder", e.work, "--agent", "claude-code", "--message", "hi", "m/a2"}, 64,
			[]string{"did you mean --agent claude_code?"}, nil},
		{"agent Claude_Code", []string{"thread", "new", "--work-folder", e.work, "--agent", "Claude_Code", "--message", "hi", "m/a3"}, 64,
			[]string{"did you mean --agent claude_code?"}, nil},
		{"relative work folder", []string{"thread", "new", "--work-folder", "demo-repo", "--message", "hi", "m/w1"}, 64,
			[]string{"WORK_FOLDER_NOT_ABSOLUTE", "did you mean --work-folder " + filepath.Join(e.root, "demo-repo") + "?"}, nil},
		{"unexpanded ~", []string{"thread", "new", "--work-folder=~/demo-repo", "--message", "hi", "m/w2"}, 64,
			[]string{"the shell leaves ~ unexpanded", filepath.Join(e.home, "demo-repo")}, nil},
		{"message without --message", []string{"thread", "new", "--work-folder", e.work, "hi", "m/x3"}, 64,
			[]string{"the first message goes in --message", "--message hi m/x3"}, []string{"put flags before"}},
		{"guarded without a policy", []string{"thread", "new", "--work-folder", e.work, "--permissions", "guarded", "--message", "hi", "m/g1"}, 64,
			[]string{"POLICY_MISSING", "--policy FILE", "action: allow", "contrib/policy.example.yaml"}, []string{"thread.metadata.policy"}},
		{"guarded with the example policy", []string{"thread", "new", "--work-folder", e.work, "--permissions", "guarded", "--policy", filepath.Join(cwd, "contrib", "policy.example.yaml"), "--message", "hi", "m/g2"}, 0,
			[]string{"handed off (pending)"}, nil},
		{"autonomous on a machine that forbids it", []string{"thread", "new", "--work-folder", e.work, "--permissions", "autonomous", "--message", "hi", "m/p1"}, 0,
			[]string{"does not allow autonomous threads", "--permissions approval", "policy.allow_autonomous: true in " + e.configPath()}, nil},
		{"no message", []string{"thread", "new", "--work-folder", e.work, "m/n1"}, 0,
			[]string{"has no message yet", "bhw-run thread post m/n1"}, nil},
		{"no alias", nil, 64,
			[]string{"missing <alias>: name the thread to run"}, []string{"USAGE:", "EXIT CODES"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := e.run(tc.args...)
			out := stdout + stderr
			if code != tc.exit {
				t.Errorf("exit %d, want %d", code, tc.exit)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("no %q in:\n%s", w, out)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(out, n) {
					t.Errorf("%q in:\n%s", n, out)
				}
			}
		})
	}
}

// TestConfigMistakesNameTheLine: a mistyped key of config.yaml and a tab
// in its indentation are refused (78) with the file, the line and, for
// the key, the one meant.
func TestConfigMistakesNameTheLine(t *testing.T) {
	e := newE2E(t)
	e.useFileStore()
	for _, tc := range []struct {
		name, config string
		want         []string
	}{
		{"a mistyped top-level key", "concurrency:\n  max_agents: 2\npolcy:\n  allow_autonomous: false\n",
			[]string{"line 3: unknown key polcy; did you mean policy?"}},
		{"a mistyped nested key", "policy:\n  allow_autonomus: true\n",
			[]string{"line 2: policy has no key allow_autonomus; did you mean allow_autonomous?"}},
		{"a mistyped agent key", "agents:\n  claude_code:\n    permision: approval\n",
			[]string{"line 3: agents.claude_code: unknown key", "permision", "(did you mean permissions?)"}},
		{"a tab", "agents:\n\tclaude_code:\n    permissions: approval\n",
			[]string{"line 2 indents with a tab; YAML indents with spaces only"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(e.configPath(), []byte(tc.config), 0o600); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := e.run("ls")
			out := stdout + stderr
			if code != 78 || !strings.Contains(out, "INVALID_CONFIG") || !strings.Contains(out, e.configPath()) {
				t.Errorf("exit %d, want 78 INVALID_CONFIG naming %s:\n%s", code, e.configPath(), out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("no %q in:\n%s", w, out)
				}
			}
		})
	}
}
