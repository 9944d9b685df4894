package policy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func bash(cmd string) Call {
	in, _ := json.Marshal(map[string]string{"command": cmd, "description": "run it"})
	return Call{Tool: "Bash", Effect: EffectExec, Input: in, Target: Target{Command: cmd},
		Fingerprint: bashFingerprint(cmd), Kind: KindApproval}
}

// bashFingerprint is the fingerprint of a Bash call as its adapter makes
// it: the command, not the description a person reads.
func bashFingerprint(cmd string) string {
	return Fingerprint(map[string]any{"tool": "Bash", "input": map[string]string{"command": cmd}})
}

func fileCall(effect string, paths ...string) Call {
	tool := "Write"
	if effect == EffectRead {
		tool = "Read"
	}
	return Call{Tool: tool, Effect: effect, Target: Target{Paths: paths}, Kind: KindApproval,
		Fingerprint: Fingerprint(map[string]any{"tool": tool, "paths": paths})}
}

func web(url string) Call {
	return Call{Tool: "WebFetch", Effect: EffectNetwork, Target: Target{URL: url}, Kind: KindApproval}
}

func noEffect(tool string) Call {
	return Call{Tool: tool, Kind: KindApproval, Fingerprint: Fingerprint(map[string]any{"tool": tool})}
}

func question() Call {
	return Call{Tool: "AskUserQuestion", Kind: KindAskUserQuestion}
}

func exR(cmd, d string) Rule                  { return Rule{Effect: EffectExec, Command: []string{cmd}, Action: d} }
func pathR(e, p, d string) Rule               { return Rule{Effect: e, Outside: OutsideWorkFolder, Action: d} }
func effectR(e, d string) Rule                { return Rule{Effect: e, Action: d} }
func thread(def string, rules ...Rule) Policy { return Policy{Default: def, Rules: rules} }

// fixture is a work folder with links pointing out of it, and a folder
// outside it.
type fixture struct {
	work, out, workLink string
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	root := t.TempDir()
	f := fixture{work: filepath.Join(root, "work"), out: filepath.Join(root, "out"), workLink: filepath.Join(root, "worklink")}
	for _, d := range []string{f.work, f.out, filepath.Join(f.work, "src")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		filepath.Join(f.work, "to-out"):   f.out,                           // a folder link leading out
		filepath.Join(f.work, "dangling"): filepath.Join(f.out, "new.txt"), // a dangling link leading out
		filepath.Join(f.work, "rel-out"):  "../out",                        // a relative link leading out
		filepath.Join(f.work, "loop-a"):   filepath.Join(f.work, "loop-b"), // a loop
		filepath.Join(f.work, "loop-b"):   filepath.Join(f.work, "loop-a"), //
		filepath.Join(f.work, "in-link"):  filepath.Join(f.work, "src"),    // a link that stays inside
		f.workLink:                        f.work,                          // the work folder through a link
		filepath.Join(root, "outlink"):    f.out,                           // a link to out, for patterns
	}
	for l, target := range links {
		if err := os.Symlink(target, l); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

type gateCase struct {
	name    string
	gate    Gate
	call    Call
	want    string
	by      string // "worker 2" / "thread 1" (1-based), "" = no rule
	granted bool
	part    string
}

func TestDecide(t *testing.T) {
	f := newFixture(t)
	root := filepath.Dir(f.work)
	aut := func(g Gate) Gate { g.Posture = PostureAutonomous; return g }
	app := func(g Gate) Gate { g.Posture = PostureApproval; return g }
	grd := func(g Gate) Gate { g.Posture = PostureGuarded; return g }
	w := func(rules ...Rule) Gate { return Gate{Worker: rules, WorkFolder: f.work} }
	th := func(p Policy, worker ...Rule) Gate { return Gate{Worker: worker, Thread: p, WorkFolder: f.work} }
	grant := func(g Gate, c Call) Gate { g.Grants = []string{"sha256:other", c.Fingerprint}; return g }
	rmDeny := exR("rm -rf *", DecisionDeny)

	cases := []gateCase{
		// autonomous: no gate, except that the agent's own questions always wait.
		{name: "autonomous allows what a worker rule denies", gate: aut(w(rmDeny)), call: bash("rm -rf build"), want: DecisionAllow},
		{name: "autonomous allows writes outside", gate: aut(w(pathR(EffectWrite, "/etc/**", DecisionDeny))), call: fileCall(EffectWrite, "/etc/passwd"), want: DecisionAllow},
		{name: "autonomous allows a no-effect tool", gate: aut(th(thread(DecisionDeny))), call: noEffect("Task"), want: DecisionAllow},
		{name: "autonomous still asks a question", gate: aut(w()), call: question(), want: DecisionAsk},

		// approval: the owner's deny and ask rules; everything else is asked.
		{name: "approval asks a plain command", gate: app(w()), call: bash("ls"), want: DecisionAsk},
		{name: "approval ignores a worker allow", gate: app(w(exR("ls", DecisionAllow))), call: bash("ls"), want: DecisionAsk},
		{name: "approval applies a worker deny", gate: app(w(exR("ls", DecisionAllow), rmDeny)), call: bash("rm -rf build"), want: DecisionDeny, by: "worker 2"},
		{name: "approval names a worker ask", gate: app(w(exR("git push *", DecisionAsk))), call: bash("git push origin main"), want: DecisionAsk, by: "worker 1"},
		{name: "approval ignores a thread allow", gate: app(th(thread(DecisionAllow, exR("ls", DecisionAllow)))), call: bash("ls"), want: DecisionAsk},
		{name: "approval ignores a thread deny", gate: app(th(thread("", exR("ls", DecisionDeny)))), call: bash("ls"), want: DecisionAsk},
		{name: "approval ignores the thread default", gate: app(th(thread(DecisionAllow))), call: fileCall(EffectWrite, "/etc/passwd"), want: DecisionAsk},
		{name: "approval: grant allows", gate: app(grant(w(), bash("make deploy"))), call: bash("make deploy"), want: DecisionAllow, granted: true},
		{name: "approval: worker deny beats a grant", gate: app(grant(w(rmDeny), bash("rm -rf /"))), call: bash("rm -rf /"), want: DecisionDeny, by: "worker 1"},
		{name: "approval asks a no-effect tool", gate: app(th(thread(DecisionAllow))), call: noEffect("mcp__db__query"), want: DecisionAsk},
		{name: "approval: grant covers a no-effect tool", gate: app(grant(w(), noEffect("Task"))), call: noEffect("Task"), want: DecisionAllow, granted: true},
		{name: "approval: worker path deny outside", gate: app(w(pathR(EffectWrite, "/etc/**", DecisionDeny))), call: fileCall(EffectWrite, "/etc/hosts"), want: DecisionDeny, by: "worker 1"},
		{name: "approval: path deny never matches inside", gate: app(w(pathR(EffectWrite, "/**", DecisionDeny))), call: fileCall(EffectWrite, filepath.Join(f.work, "x.txt")), want: DecisionAsk},
		{name: "approval: compound line denied by one part", gate: app(w(rmDeny)), call: bash("ls && rm -rf build"), want: DecisionDeny, by: "worker 1", part: "rm -rf build"},
		{name: "approval: network deny", gate: app(w(effectR(EffectNetwork, DecisionDeny))), call: web("https://example.com"), want: DecisionDeny, by: "worker 1"},
		{name: "empty posture is approval", gate: w(exR("ls", DecisionAllow)), call: bash("ls"), want: DecisionAsk},
		{name: "unknown posture fails closed to approval", gate: Gate{Posture: "yolo", Thread: thread(DecisionAllow)}, call: bash("ls"), want: DecisionAsk},
		{name: "approval: question asks", gate: app(w()), call: question(), want: DecisionAsk},

		// guarded: defaults.
		{name: "guarded: unset default allows, as the worker", gate: grd(th(thread(""))), call: bash("ls"), want: DecisionAllow},
		{name: "guarded: default allow", gate: grd(th(thread(DecisionAllow))), call: bash("ls"), want: DecisionAllow},
		{name: "guarded: default deny", gate: grd(th(thread(DecisionDeny))), call: bash("ls"), want: DecisionDeny},
		{name: "guarded: unknown default fails closed", gate: grd(th(thread("maybe"))), call: bash("ls"), want: DecisionAsk},

		// guarded: command rules.
		{name: "guarded: thread allow by pattern", gate: grd(th(thread("", exR("ls *", DecisionAllow)))), call: bash("ls -la /"), want: DecisionAllow, by: "thread 1"},
		{name: "guarded: pattern is anchored at the end", gate: grd(th(thread(DecisionAsk, exR("ls *", DecisionAllow)))), call: bash("ls"), want: DecisionAsk},
		{name: "guarded: pattern is anchored at the start", gate: grd(th(thread(DecisionAllow, exR("rm *", DecisionDeny)))), call: bash("echo rm x"), want: DecisionAllow},
		{name: "guarded: star spans slashes and spaces", gate: grd(th(thread("", exR("cat /etc/*", DecisionDeny)))), call: bash("cat /etc/ssl/certs/a b"), want: DecisionDeny, by: "thread 1"},
		{name: "guarded: whitespace folded", gate: grd(th(thread("", exR("git   status", DecisionAllow)))), call: bash("  git \t status  "), want: DecisionAllow, by: "thread 1"},
		{name: "guarded: worker deny beats a thread allow", gate: grd(th(thread("", exR("*", DecisionAllow)), rmDeny)), call: bash("rm -rf build"), want: DecisionDeny, by: "worker 1"},
		{name: "guarded: worker deny beats an earlier worker allow", gate: grd(w(exR("rm *", DecisionAllow), rmDeny)), call: bash("rm -rf build"), want: DecisionDeny, by: "worker 2"},
		{name: "guarded: worker allow comes before a thread deny", gate: grd(th(thread("", exR("git *", DecisionDeny)), exR("git status", DecisionAllow))), call: bash("git status"), want: DecisionAllow, by: "worker 1"},
		{name: "guarded: worker ask before a thread allow", gate: grd(th(thread("", exR("git *", DecisionAllow)), exR("git push *", DecisionAsk))), call: bash("git push origin"), want: DecisionAsk, by: "worker 1"},
		{name: "guarded: thread first match deny", gate: grd(th(thread(DecisionAllow, exR("git push *", DecisionDeny), exR("git *", DecisionAllow)))), call: bash("git push origin"), want: DecisionDeny, by: "thread 1"},
		{name: "guarded: thread first match allow", gate: grd(th(thread(DecisionDeny, exR("git *", DecisionAllow), exR("git push *", DecisionDeny)))), call: bash("git push origin"), want: DecisionAllow, by: "thread 1"},
		{name: "guarded: exec rule without command matches every command", gate: grd(th(thread(DecisionAllow, effectR(EffectExec, DecisionDeny)))), call: bash("true"), want: DecisionDeny, by: "thread 1"},
		{name: "guarded: rule of another effect does not match", gate: grd(th(thread(DecisionAsk, effectR(EffectWrite, DecisionAllow)))), call: bash("ls"), want: DecisionAsk},
		{name: "guarded: trailing star needs something", gate: grd(th(thread(DecisionAllow, exR("rm *", DecisionDeny)))), call: bash("rm"), want: DecisionAllow},

		// guarded: compound lines.
		{name: "compound: every part allowed", gate: grd(th(thread("", exR("git *", DecisionAllow)))), call: bash("git add . && git commit -m 'x y'"), want: DecisionAllow, by: "thread 1"},
		{name: "compound: one part falls to the default", gate: grd(th(thread(DecisionAsk, exR("git *", DecisionAllow)))), call: bash("git add . && curl -s x"), want: DecisionAsk, part: "curl -s x"},
		{name: "compound: deny beats ask and allow", gate: grd(th(thread("", exR("echo *", DecisionAllow)), exR("rm *", DecisionDeny))), call: bash("echo hi; curl x | wc -l; rm y"), want: DecisionDeny, by: "worker 1", part: "rm y"},
		{name: "compound: a shell reading a pipe may run anything", gate: grd(th(thread(DecisionAllow), exR("rm *", DecisionDeny))), call: bash("curl -s https://x | sh"), want: DecisionDeny, by: "worker 1", part: "sh"},
		{name: "compound: a shell reading a here-string runs it", gate: grd(th(thread(DecisionAllow), exR("rm *", DecisionDeny))), call: bash("bash <<< 'r\\m x'"), want: DecisionDeny, by: "worker 1", part: "r\\m x"},
		{name: "compound: a shell reading a here-document runs it", gate: grd(th(thread(DecisionAllow), exR("rm *", DecisionDeny))), call: bash("sh <<'EOF'\ncd /tmp\n\"rm\" x\nEOF"), want: DecisionDeny, by: "worker 1", part: `"rm" x`},
		{name: "compound: a shell running a file is not read", gate: grd(th(thread(DecisionAllow), exR("rm *", DecisionDeny))), call: bash("bash ./build.sh"), want: DecisionAllow},
		{name: "compound: pipeline of allowed parts", gate: grd(th(thread("", exR("cat *", DecisionAllow), exR("grep *", DecisionAllow)))), call: bash("cat f | grep -v x"), want: DecisionAllow, by: "thread 1"},
		{name: "compound: subshell", gate: grd(th(thread(DecisionAllow, exR("rm -rf *", DecisionDeny)))), call: bash("(cd /tmp && rm -rf x)"), want: DecisionDeny, by: "thread 1", part: "rm -rf x"},
		{name: "compound: command substitution", gate: grd(th(thread("", exR("echo *", DecisionAllow), exR("rm -rf *", DecisionDeny)))), call: bash("echo $(rm -rf x)"), want: DecisionDeny, by: "thread 2", part: "rm -rf x"},
		{name: "compound: backticks", gate: grd(th(thread(DecisionAsk, exR("echo *", DecisionAllow)))), call: bash("echo `whoami`"), want: DecisionAsk, part: "whoami"},
		{name: "compound: bash -c script is judged too", gate: grd(th(thread("", exR("bash *", DecisionAllow), exR("rm -rf *", DecisionDeny)))), call: bash("bash -c 'rm -rf x'"), want: DecisionDeny, by: "thread 2", part: "rm -rf x"},
		{name: "compound: redirection stays with its command", gate: grd(th(thread("", exR("* > /etc/*", DecisionDeny), exR("echo *", DecisionAllow)))), call: bash("echo hi > /etc/motd"), want: DecisionDeny, by: "thread 1"},
		{name: "compound: background and negation dropped", gate: grd(th(thread("", exR("sleep *", DecisionAllow)))), call: bash("! sleep 5 &"), want: DecisionAllow, by: "thread 1"},
		{name: "compound: function body judged", gate: grd(th(thread(DecisionAllow, exR("rm -rf /", DecisionDeny)))), call: bash("f() { rm -rf /; }; f"), want: DecisionDeny, by: "thread 1"},
		{name: "compound: a pipeline deny rule matches the whole line", gate: grd(th(thread("", exR("curl *", DecisionAllow), exR("sh", DecisionAllow), exR("curl * | sh", DecisionDeny)))), call: bash("curl -s https://x | sh"), want: DecisionDeny, by: "thread 3"},
		{name: "unparsable line is never allowed: ask", gate: grd(th(thread("", exR("echo *", DecisionAllow)))), call: bash("echo 'unterminated"), want: DecisionAsk},
		{name: "unparsable line: bash runs the lines before the error", gate: grd(th(thread(DecisionAllow, exR("echo *", DecisionAllow)), rmDeny)), call: bash("echo hi\nrm -rf ~\n'"), want: DecisionDeny, by: "worker 1", part: "rm -rf ~"},
		{name: "unparsable line: the lines before the error are allowed, the line asks", gate: grd(th(thread(DecisionAllow), rmDeny)), call: bash("echo hi\nls\n'"), want: DecisionAsk},
		{name: "unparsable line judged whole: deny", gate: grd(w(exR("*'*", DecisionDeny))), call: bash("echo 'unterminated"), want: DecisionDeny, by: "worker 1"},

		// guarded: grants.
		{name: "grant beats a thread ask", gate: grd(grant(th(thread("", exR("rm *", DecisionAsk))), bash("rm x"))), call: bash("rm x"), want: DecisionAllow, granted: true},
		{name: "grant does not beat a thread deny, which the worker applies", gate: grd(grant(th(thread("", exR("rm *", DecisionDeny))), bash("rm x"))), call: bash("rm x"), want: DecisionDeny, by: "thread 1"},
		{name: "worker deny beats a grant", gate: grd(grant(w(rmDeny), bash("rm -rf x"))), call: bash("rm -rf x"), want: DecisionDeny, by: "worker 1"},
		{name: "worker deny on one part beats a grant", gate: grd(grant(w(rmDeny), bash("ls; rm -rf x"))), call: bash("ls; rm -rf x"), want: DecisionDeny, by: "worker 1"},
		{name: "grant for another call does not apply", gate: grd(grant(th(thread(DecisionDeny)), bash("rm x"))), call: bash("rm y"), want: DecisionDeny},
		{name: "grant ignores the description", gate: grd(grant(th(thread(DecisionAsk)), bash("make"))),
			call: func() Call {
				c := bash("make")
				c.Input = json.RawMessage(`{"description":"another wording","command":"make"}`)
				c.Fingerprint = bashFingerprint("make")
				c.InvocationID = "toolu_other"
				return c
			}(), want: DecisionAllow, granted: true},
		{name: "no fingerprint, no grant", gate: grd(Gate{Thread: thread(DecisionDeny), Grants: []string{""}}), call: Call{Effect: EffectExec, Target: Target{Command: "x"}}, want: DecisionDeny},

		// guarded: paths.
		{name: "path: deny outside", gate: grd(th(thread(DecisionAllow, pathR(EffectWrite, "/etc/**", DecisionDeny)))), call: fileCall(EffectWrite, "/etc/passwd"), want: DecisionDeny, by: "thread 1"},
		{name: "path: rule never matches inside", gate: grd(th(thread(DecisionAllow, pathR(EffectWrite, "/**", DecisionDeny)))), call: fileCall(EffectWrite, filepath.Join(f.work, "src", "a.go")), want: DecisionAllow},
		{name: "path: one outside path among several", gate: grd(th(thread(DecisionAllow, pathR(EffectWrite, "/etc/**", DecisionDeny)))), call: fileCall(EffectWrite, filepath.Join(f.work, "a"), "/etc/hosts"), want: DecisionDeny, by: "thread 1"},
		{name: "path: folder link leading out", gate: grd(th(thread(DecisionAllow, pathR(EffectWrite, f.out+"/**", DecisionDeny)))), call: fileCall(EffectWrite, filepath.Join(f.work, "to-out", "x", "y.txt")), want: DecisionDeny, by: "thread 1"},
		{name: "path: relative link leading out", gate: grd(th(thread(DecisionAllow, pathR(EffectWrite, f.out+"/*", DecisionDeny)))), call: fileCall(EffectWrite, filepath.Join(f.work, "rel-out", "z")), want: DecisionDeny, by: "thread 1"},
		{name: "path: dangling link leading out", gate: grd(th(thread(DecisionAllow, pathR(EffectWrite, f.out+"/new.txt", DecisionDeny)))), call: fileCall(EffectWrite, filepath.Join(f.work, "dangling")), want: DecisionDeny, by: "thread 1"},
		{name: "path: link that stays inside", gate: grd(th(thread(DecisionAllow, pathR(EffectWrite, "/**", DecisionDeny)))), call: fileCall(EffectWrite, filepath.Join(f.work, "in-link", "a")), want: DecisionAllow},
		{name: "path: loop cannot be resolved, counts as outside", gate: grd(th(thread(DecisionAllow, pathR(EffectWrite, "/**", DecisionDeny)))), call: fileCall(EffectWrite, filepath.Join(f.work, "loop-a", "x")), want: DecisionDeny, by: "thread 1"},
		{name: "path: relative inside", gate: grd(th(thread(DecisionAllow, pathR(EffectWrite, "/**", DecisionDeny)))), call: fileCall(EffectWrite, "src/x.go"), want: DecisionAllow},
		{name: "path: relative escaping with ..", gate: grd(th(thread(DecisionAllow, pathR(EffectWrite, f.out+"/**", DecisionDeny)))), call: fileCall(EffectWrite, "../out/x"), want: DecisionDeny, by: "thread 1"},
		{name: "path: relative to the call's cwd", gate: grd(th(thread(DecisionAllow, pathR(EffectWrite, f.out+"/**", DecisionDeny)))),
			call: func() Call { c := fileCall(EffectWrite, "x"); c.Target.Cwd = f.out; return c }(), want: DecisionDeny, by: "thread 1"},
		{name: "path: work folder given through a link", gate: grd(Gate{Thread: thread(DecisionAllow, pathR(EffectWrite, "/**", DecisionDeny)), WorkFolder: f.workLink}), call: fileCall(EffectWrite, filepath.Join(f.work, "a")), want: DecisionAllow},
		{name: "path: unresolvable work folder, everything outside", gate: grd(Gate{Thread: thread(DecisionAllow, pathR(EffectWrite, "/**", DecisionDeny)), WorkFolder: filepath.Join(f.work, "loop-a")}), call: fileCall(EffectWrite, filepath.Join(f.work, "loop-a", "a")), want: DecisionDeny, by: "thread 1"},
		{name: "path: pattern base through a link", gate: grd(th(thread(DecisionAllow, pathR(EffectWrite, filepath.Join(root, "outlink")+"/**", DecisionDeny)))), call: fileCall(EffectWrite, filepath.Join(f.out, "a")), want: DecisionDeny, by: "thread 1"},
		{name: "path: grantRoot counts as a path", gate: grd(th(thread(DecisionAllow, pathR(EffectWrite, f.out, DecisionDeny)))),
			call: func() Call { c := fileCall(EffectWrite, filepath.Join(f.work, "a")); c.GrantRoot = f.out; return c }(), want: DecisionDeny, by: "thread 1"},
		{name: "path: read allow", gate: grd(th(thread(DecisionDeny, pathR(EffectRead, "/usr/**", DecisionAllow)))), call: fileCall(EffectRead, "/usr/share/dict/words"), want: DecisionAllow, by: "thread 1"},
		{name: "path: write rule does not match a read", gate: grd(th(thread(DecisionAsk, pathR(EffectWrite, "/etc/**", DecisionDeny)))), call: fileCall(EffectRead, "/etc/passwd"), want: DecisionAsk},
		{name: "path: a call without a path counts as outside, as the worker", gate: grd(th(thread(DecisionAllow, pathR(EffectRead, "/**", DecisionDeny)))), call: fileCall(EffectRead), want: DecisionDeny, by: "thread 1"},
		{name: "path: read rule without path matches inside too", gate: grd(th(thread(DecisionDeny, effectR(EffectRead, DecisionAllow)))), call: fileCall(EffectRead, filepath.Join(f.work, "a")), want: DecisionAllow, by: "thread 1"},

		// guarded: network, no effect, questions.
		{name: "network: thread deny", gate: grd(th(thread(DecisionAllow, effectR(EffectNetwork, DecisionDeny)))), call: web("https://x"), want: DecisionDeny, by: "thread 1"},
		{name: "network: worker allow before thread deny", gate: grd(th(thread("", effectR(EffectNetwork, DecisionDeny)), effectR(EffectNetwork, DecisionAllow))), call: web("https://x"), want: DecisionAllow, by: "worker 1"},
		{name: "no effect: default ask", gate: grd(th(thread(DecisionAsk, effectR(EffectExec, DecisionAllow)))), call: noEffect("Task"), want: DecisionAsk},
		{name: "no effect: default allow beats every rule", gate: grd(th(thread(DecisionAllow, effectR(EffectExec, DecisionDeny)), effectR(EffectWrite, DecisionDeny))), call: noEffect("mcp__x__y"), want: DecisionAllow},
		{name: "no effect: default deny", gate: grd(th(thread(DecisionDeny))), call: noEffect("EnterWorktree"), want: DecisionDeny},
		{name: "guarded: question asks whatever the default", gate: grd(th(thread(DecisionAllow))), call: question(), want: DecisionAsk},
	}
	if len(cases) < 60 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.gate.Decide(tc.call)
			if d.Decision != tc.want {
				t.Errorf("decision = %s (%s), want %s", d.Decision, d.Reason, tc.want)
			}
			by := ""
			if d.By != nil {
				by = string(d.By.Source) + " " + itoa(d.By.Index+1)
			}
			if by != tc.by {
				t.Errorf("by = %q, want %q (%s)", by, tc.by, d.Reason)
			}
			if d.Granted != tc.granted {
				t.Errorf("granted = %v, want %v", d.Granted, tc.granted)
			}
			if tc.part != "" && d.Part != tc.part {
				t.Errorf("part = %q, want %q", d.Part, tc.part)
			}
			if d.Reason == "" {
				t.Error("empty reason")
			}
			if ex := Explain(tc.gate, tc.call); !strings.Contains(ex, "decision: "+d.Decision+" ("+d.Reason+")") {
				t.Errorf("explain disagrees with decide:\n%s\nwant %s (%s)", ex, d.Decision, d.Reason)
			}
		})
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestReasonAndVerdict(t *testing.T) {
	g := Gate{Posture: PostureGuarded, Worker: []Rule{exR("ls", DecisionAllow), exR("rm -rf *", DecisionDeny)}, Thread: thread(DecisionAllow)}
	d := g.Decide(bash("echo a && rm -rf build"))
	want := `denied by worker rule 2 (exec deny "rm -rf *") for "rm -rf build"`
	if d.Reason != want {
		t.Errorf("reason = %q, want %q", d.Reason, want)
	}
	v := d.Verdict()
	if v.Action != Deny || !strings.Contains(v.Message, "worker rule 2") {
		t.Errorf("verdict = %+v", v)
	}
	if v := (Decision{Decision: DecisionAsk}).Verdict(); v.Action != Park {
		t.Errorf("ask → %v, want park", v.Action)
	}
	if v := (Decision{Decision: DecisionAllow}).Verdict(); v.Action != Allow {
		t.Errorf("allow → %v, want allow", v.Action)
	}
	r := pathR(EffectWrite, "", DecisionDeny)
	r.ID = "stay-home"
	d = Gate{Posture: PostureGuarded, Thread: thread("", r)}.Decide(fileCall(EffectWrite, "/etc/x"))
	if want := `denied by thread rule "stay-home" (write deny outside work_folder)`; d.Reason != want {
		t.Errorf("reason = %q, want %q", d.Reason, want)
	}
}

func TestExplain(t *testing.T) {
	f := newFixture(t)
	g := Gate{Posture: PostureGuarded, WorkFolder: f.work,
		Worker: []Rule{exR("rm -rf *", DecisionDeny)},
		Thread: thread(DecisionAsk, exR("git *", DecisionAllow))}
	ex := Explain(g, bash("git status && make"))
	for _, want := range []string{
		"posture: guarded",
		`command parts: "git status", "make"`,
		`part "git status": allowed by thread rule 1 (exec allow "git *")`,
		`part "make": held for a person by the thread's default`,
		`decision: ask (held for a person by the thread's default for "make")`,
		"cannot see", "Codex sandbox",
	} {
		if !strings.Contains(ex, want) {
			t.Errorf("explain lacks %q:\n%s", want, ex)
		}
	}
	ex = Explain(g, fileCall(EffectWrite, filepath.Join(f.work, "to-out", "a"), filepath.Join(f.work, "b")))
	for _, want := range []string{"outside the work folder (" + filepath.Join(f.out, "a") + ")", "inside the work folder"} {
		if !strings.Contains(ex, want) {
			t.Errorf("explain lacks %q:\n%s", want, ex)
		}
	}
	if !strings.Contains(Explain(g, noEffect("Task")), "only the thread's default") {
		t.Errorf("no-effect explanation:\n%s", Explain(g, noEffect("Task")))
	}
}

func TestRulesInForce(t *testing.T) {
	worker := []Rule{exR("ls", DecisionAllow), exR("rm *", DecisionDeny), effectR(EffectNetwork, DecisionAsk)}
	th := thread(DecisionAllow, effectR(EffectRead, DecisionAllow))
	got := Gate{Posture: PostureGuarded, Worker: worker, Thread: th}.RulesInForce()
	if len(got) != 4 || got[0].Source != SourceWorker || got[3].Source != SourceThread || got[3].Index != 0 {
		t.Errorf("guarded: %+v", got)
	}
	got = Gate{Posture: PostureApproval, Worker: worker, Thread: th}.RulesInForce()
	if len(got) != 2 || got[0].Index != 1 || got[1].Index != 2 {
		t.Errorf("approval: %+v", got)
	}
	if got := (Gate{Posture: PostureAutonomous, Worker: worker}).RulesInForce(); len(got) != 0 {
		t.Errorf("autonomous: %+v", got)
	}
}

// A symlink followed by ".." is resolved the way the kernel opens it: the
// ".." leaves the link's target, not the link. Cleaning first made
// <work>/to-sub/../x read as <work>/x (inside) while a write lands in
// <out>/x, past the machine owner's deny.
func TestDecideDotDotAfterLink(t *testing.T) {
	f := newFixture(t)
	if err := os.MkdirAll(filepath.Join(f.out, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(f.out, "sub"), filepath.Join(f.work, "to-sub")); err != nil {
		t.Fatal(err)
	}
	// A link to a folder two levels down inside: "../.." from it stays inside
	// for the kernel but leaves the work folder when cleaned first.
	if err := os.MkdirAll(filepath.Join(f.work, "d1", "d2"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(f.work, "d1", "d2"), filepath.Join(f.work, "deep")); err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(f.work)
	for _, tc := range []struct {
		name string
		rule Rule
		call Call
	}{
		{"absolute", pathR(EffectWrite, f.out+"/**", DecisionDeny), fileCall(EffectWrite, filepath.Join(f.work, "to-sub")+"/../x")},
		{"relative", pathR(EffectWrite, f.out+"/**", DecisionDeny), fileCall(EffectWrite, "to-sub/../x")},
		{"cleaned reading leaves", pathR(EffectWrite, root+"/*", DecisionDeny), fileCall(EffectWrite, filepath.Join(f.work, "deep")+"/../../x")},
	} {
		g := Gate{Posture: PostureGuarded, Worker: []Rule{tc.rule}, Thread: thread(DecisionAllow), WorkFolder: f.work}
		if d := g.Decide(tc.call); d.Decision != DecisionDeny {
			t.Errorf("%s: %v = %s (%s), want deny by worker 1", tc.name, tc.call.Target.Paths, d.Decision, d.Reason)
		}
	}
}
