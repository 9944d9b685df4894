package policy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNeverLooserThanTheWorker holds the calls bhw-run once let through
// where blobhub-worker holds them back: git's relocation options, an
// assignment before an allowed command, a wrapper hiding the command an
// ask rule names, and the glob characters ? and [...].
func TestNeverLooserThanTheWorker(t *testing.T) {
	noPush := Rule{ID: "no-push", Effect: EffectExec, Action: DecisionDeny, Command: []string{"git push*"}}
	guarded := func(def string, rules ...Rule) Gate {
		return Gate{Posture: PostureGuarded, Thread: Policy{Default: def, Rules: rules}}
	}
	cases := []struct {
		name, line string
		gate       Gate
		want       string
	}{
		{"git -C", "git -C /repo push", guarded(DecisionAllow, noPush), DecisionDeny},
		{"git --git-dir=", "git --git-dir=x push origin", guarded(DecisionAllow, noPush), DecisionDeny},
		{"git --git-dir x", "git --git-dir x push", guarded(DecisionAllow, noPush), DecisionDeny},
		{"git -c", "git -c k=v push", guarded(DecisionAllow, noPush), DecisionDeny},
		{"git --work-tree", "git --work-tree x push", guarded(DecisionAllow, noPush), DecisionDeny},
		{"git options combined", "git -C x -c a=b --namespace n push", guarded(DecisionAllow, noPush), DecisionDeny},
		{"git -C in a pipeline", "git -C /repo push origin main 2>&1 | tail -20", guarded(DecisionAllow, noPush), DecisionDeny},
		// Deeper than the worker: a respelled git, and options it does not fold.
		{"quoted git -C", `"git" -C /repo push`, guarded(DecisionAllow, noPush), DecisionDeny},
		{"git --no-pager", "git --no-pager push", guarded(DecisionAllow, noPush), DecisionDeny},
		{"git -C past sudo", "sudo git -C /repo push", guarded(DecisionAllow, noPush), DecisionDeny},

		{"assignment before an allowed command, default ask", "FOO=1 git push", guarded(DecisionAsk, Rule{Effect: EffectExec, Action: DecisionAllow, Command: []string{"git *"}}), DecisionAsk},
		{"assignment before an allowed command, default deny", "GIT_SSH_COMMAND=evil git push", guarded(DecisionDeny, Rule{Effect: EffectExec, Action: DecisionAllow, Command: []string{"git *"}}), DecisionDeny},
		{"LD_PRELOAD before an allowed command", "LD_PRELOAD=/tmp/x.so ls", guarded(DecisionAsk, Rule{Effect: EffectExec, Action: DecisionAllow, Command: []string{"ls*"}}), DecisionAsk},

		{"sudo under an ask rule, default deny", "sudo rm -rf /", guarded(DecisionDeny, Rule{Effect: EffectExec, Action: DecisionAsk, Command: []string{"rm *"}}), DecisionDeny},
		{"env under an ask rule, default deny", "env rm -rf /", guarded(DecisionDeny, Rule{Effect: EffectExec, Action: DecisionAsk, Command: []string{"rm *"}}), DecisionDeny},
		{"nice under an ask rule, default deny", "nice -n 5 git push", guarded(DecisionDeny, Rule{Effect: EffectExec, Action: DecisionAsk, Command: []string{"git push*"}}), DecisionDeny},
		{"wrapper denied by its own rule after an ask for the inner", "sudo rm x", guarded(DecisionAllow, Rule{Effect: EffectExec, Action: DecisionAsk, Command: []string{"rm *"}}, Rule{Effect: EffectExec, Action: DecisionDeny, Command: []string{"sudo *"}}), DecisionDeny},
		{"wrapper: the inner command is still judged", "sudo rm x", guarded(DecisionAllow, Rule{Effect: EffectExec, Action: DecisionDeny, Command: []string{"rm *"}}), DecisionDeny},

		{"? is one character", "rm -rf /", guarded(DecisionAllow, Rule{Effect: EffectExec, Action: DecisionDeny, Command: []string{"rm -?f *"}}), DecisionDeny},
		{"[...] is a set", "git push", guarded(DecisionAllow, Rule{Effect: EffectExec, Action: DecisionDeny, Command: []string{"git [op]ush"}}), DecisionDeny},
		{"[!...] is outside a set", "git push", guarded(DecisionAllow, Rule{Effect: EffectExec, Action: DecisionDeny, Command: []string{"git [!s]*"}}), DecisionDeny},
		{"an allow [...] does not allow outside its set", "git push", guarded(DecisionAsk, Rule{Effect: EffectExec, Action: DecisionAllow, Command: []string{"git [s]*"}}), DecisionAsk},

		// What the worker allows, bhw-run may allow too.
		{"plain allow", "git status", guarded(DecisionAsk, Rule{Effect: EffectExec, Action: DecisionAllow, Command: []string{"git status"}}), DecisionAllow},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.gate.Decide(bash(tc.line))
			w := WorkerDecide(tc.gate.Worker, tc.gate.Thread, "", "", bash(tc.line))
			if d.Decision != tc.want {
				t.Errorf("%q = %s (%s), want %s", tc.line, d.Decision, d.Reason, tc.want)
			}
			if strictness(d.Decision) < strictness(w.Action) {
				t.Errorf("%q = %s, looser than the worker's %s", tc.line, d.Decision, w.Action)
			}
		})
	}
}

func TestWorkerCommands(t *testing.T) {
	for line, want := range map[string][]string{
		"git -C /repo push origin main 2>&1 | tail -20": {"git -C /repo push origin main 2>&1 | tail -20", "git push origin main 2>&1 | tail -20", "git push origin main 2>&1", "tail -20"},
		"FOO=1 BAR=2 git push":                          {"FOO=1 BAR=2 git push", "git push"},
		"cd x && (git push)":                            {"cd x && (git push)", "cd x && (git push", "cd x", "git push"},
		`echo "a && b" && ls`:                           {`echo "a && b" && ls`, `echo "a && b"`, "ls"},
		"echo 'unterminated && ls":                      {"echo 'unterminated && ls"},
		"sleep 0 & git push; echo x 2>&1 |& cat":        {"sleep 0 & git push; echo x 2>&1 |& cat", "sleep 0", "git push", "echo x 2>&1 |& cat"},
	} {
		got := WorkerCommands(line)
		if len(got) != len(want) {
			t.Errorf("%q: %q, want %q", line, got, want)
			continue
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%q: %q, want %q", line, got, want)
				break
			}
		}
	}
}

func TestResolveOutbox(t *testing.T) {
	work := t.TempDir()
	work, _ = filepath.EvalSymlinks(work)
	if err := os.MkdirAll(filepath.Join(work, "out", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(work, "out"), filepath.Join(work, "link")); err != nil {
		t.Fatal(err)
	}
	for outbox, ok := range map[string]bool{"out": true, "out/sub": true, "new": true, "": false, "/abs": false, "link": false, ".": false, "..": false, "out/../..": false} {
		got, why := ResolveOutbox(work, outbox)
		if (got != "") != ok {
			t.Errorf("outbox %q: %q (%s), want usable %v", outbox, got, why, ok)
		}
	}
}

// TestWorkerReadingOfAHugeLine: the worker's reading of a line of many
// distinct segments stays linear (the gate judges it on every call).
func TestWorkerReadingOfAHugeLine(t *testing.T) {
	var b strings.Builder
	for i := range 200_000 {
		fmt.Fprintf(&b, "echo %d;", i)
	}
	b.WriteString("git -C x push")
	start := time.Now()
	d := WorkerDecide(nil, Policy{Rules: []Rule{{ID: "no-push", Effect: EffectExec, Action: DecisionDeny, Command: []string{"git push*"}}}}, "", "", Call{Effect: EffectExec, Target: Target{Command: b.String()}})
	if d.Action != DecisionDeny || d.RuleID != "no-push" {
		t.Errorf("decision %+v, want deny by no-push", d)
	}
	if el := time.Since(start); el > 20*time.Second {
		t.Errorf("took %s", el)
	}
}
