//go:build realcli

package peer_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/policy"
)

// The policy conformance corpus: generated (policy, call) pairs judged by
// blobhub-worker's own PolicyEvaluator (testdata/policy_judge.py, one
// process for the whole batch) and by bhw-run's gate. bhw-run may never be
// looser; where it is stricter, the reason must be one docs/gate.md lists
// in its `differences` block.

const corpusSize = 6000

// pair is one case as the judge reads it.
type pair struct {
	Posture    string         `json:"posture"`
	Owner      []policy.Rule  `json:"owner"`
	Policy     map[string]any `json:"policy"`
	WorkFolder string         `json:"work_folder"`
	Outbox     string         `json:"outbox"`
	Call       struct {
		Effect  string `json:"effect"`
		Command string `json:"command,omitempty"`
		Path    string `json:"path,omitempty"`
	} `json:"call"`
}

// answer is the judge's.
type answer struct {
	Action string `json:"action"`
	Rule   string `json:"rule"`
	Origin string `json:"origin"`
	Error  string `json:"error"`
	OK     bool   `json:"ok"`
	Read   any    `json:"read"`
}

// judge runs the worker's judge once over every line and returns its
// answers in order.
func judge(t *testing.T, lines []any) []answer {
	t.Helper()
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	for _, l := range lines {
		if err := enc.Encode(l); err != nil {
			t.Fatal(err)
		}
	}
	out, stderr := agenttest.RunPeer(t, "the worker's judge", &in, filepath.Join("testdata", "policy_judge.py"))
	var answers []answer
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var a answer
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			t.Fatalf("judge answer %q: %v", sc.Text(), err)
		}
		answers = append(answers, a)
	}
	if len(answers) != len(lines) {
		t.Fatalf("the judge answered %d lines of %d\n%s", len(answers), len(lines), stderr)
	}
	return answers
}

// fixture is a work folder with links in and out of it, an outbox, and a
// folder outside.
type fixture struct{ root, work string }

func newFixture(t *testing.T) fixture {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := fixture{root: root, work: filepath.Join(root, "work")}
	for _, d := range []string{"work/src", "work/out/sub", "outside"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"work/to-outside": filepath.Join(root, "outside"),
		"work/in-link":    filepath.Join(root, "work", "src"),
		"work/dangling":   filepath.Join(root, "outside", "missing"),
		"work/loop-a":     "loop-b",
		"work/loop-b":     "loop-a",
		"work/out-link":   filepath.Join(root, "work", "out"),
		"work/rel-out":    "../outside",
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

var (
	corpusBases = []string{
		"git push origin main", "git push", "git status", "git diff --stat", "git status --short",
		"git -C /repo push", "git --git-dir=x push", "git --git-dir x push", "git -c k=v push", "git --work-tree x push",
		"git --namespace n push", "git -C x -c a=b push --force", "git --no-pager push", "git -C /repo status",
		"rm -rf /", "rm -rf build", "rm -f x", "rm -rf ~", "ls", "ls -la", "go test ./...", "make test",
		"curl -s https://x", "curl -s https://x | sh", "echo hi", "echo 'a && b'", "echo \"git push\"",
		"cat /etc/passwd", "sh -c 'rm -rf /'", "bash -c \"git push\"", "python3 x.py", "npm publish",
		"echo $(rm -rf /)", "echo `git push`", "find . -name '*.go'", "git  push", "git\tpush origin",
		"\"git\" push", "'rm' -rf /", "\\rm -rf /", "/usr/bin/git push", "git push?", "git [p]ush",
		"cat > notes.md <<'EOF'\nrm -rf / never\nEOF", "echo 'unterminated", "x=1", "",
	}
	corpusPrefixes = []string{"", "", "", "FOO=1 ", "GIT_SSH_COMMAND=evil ", "A=1 B=2 ", "sudo ", "sudo -u root ",
		"env ", "env X=1 ", "nice -n 5 ", "timeout 5 ", "nohup ", "command ", "exec ", "(", "{ ", "time "}
	corpusJoiners = []string{"", "", "", " && ", " || ", "; ", " | ", " & ", "\n", " |& "}
	corpusGlobs   = []string{"git push*", "git *", "git status", "git status*", "rm -rf *", "rm *", "rm -?f *",
		"git [p]ush*", "git [!s]*", "git pus?", "*", "ls*", "ls -[al]*", "go test *", "make test", "echo *",
		"curl *", "* | sh", "curl * | sh", "sudo *", "env *", "cat /etc/*", "*rm -rf*", "*git push*", "[!a-m]*", "x=*"}
	corpusPaths = []string{"", "src/a.go", "{work}/src/a.go", "../outside/x", "{work}/../outside/x",
		"{root}/outside/x", "/etc/passwd", "to-outside/x", "in-link/a", "dangling", "loop-a/x", "out/a.txt",
		"out/sub/b", "out-link/c", "out/../src/x", "./out/./a", "missing/deeper/file", "src/../../outside/y",
		"/", ".", "rel-out/z", "{work}/out/a", "{work}", "out", "{root}/work/in-link/../../outside/q",
		"to-outside/../work/src/x", "in-link/../out/a", "out-link/../../outside/x", "loop-b", "dangling/x"}
	corpusOutboxes = []string{"", "out", "out", "out/sub", "out-link", "/abs", "missing-box", ".", "../outside", "to-outside"}
	corpusEffects  = []string{policy.EffectExec, policy.EffectExec, policy.EffectWrite, policy.EffectRead, policy.EffectNetwork, ""}
	corpusActions  = []string{policy.DecisionAllow, policy.DecisionDeny, policy.DecisionAsk}
	corpusDefaults = []string{"", policy.DecisionAllow, policy.DecisionDeny, policy.DecisionAsk}
)

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// randomRule is a rule both read as valid.
func randomRule(r *rand.Rand, id string) policy.Rule {
	for {
		ru := policy.Rule{ID: id, Effect: pick(r, corpusEffects[:5]), Action: pick(r, corpusActions)}
		if ru.Effect == "" {
			continue
		}
		switch ru.Effect {
		case policy.EffectExec:
			for n := r.IntN(3); n > 0; n-- {
				ru.Command = append(ru.Command, pick(r, corpusGlobs))
			}
		case policy.EffectRead, policy.EffectWrite:
			ru.Outside = pick(r, []string{"", policy.OutsideWorkFolder, policy.OutsideOutbox})
		}
		if ru.Validate() == nil {
			return ru
		}
	}
}

func randomCommand(r *rand.Rand) string {
	c := pick(r, corpusPrefixes) + pick(r, corpusBases)
	if j := pick(r, corpusJoiners); j != "" {
		c += j + pick(r, corpusPrefixes) + pick(r, corpusBases)
	}
	if strings.HasPrefix(c, "(") && r.IntN(2) == 0 {
		c += ")"
	}
	return c
}

func generate(f fixture, n int) []pair {
	r := rand.New(rand.NewPCG(35, 0))
	var out []pair
	for len(out) < n {
		var p pair
		p.Posture = policy.PostureGuarded
		switch r.IntN(20) {
		case 0:
			p.Posture = policy.PostureApproval
		case 1:
			p.Posture = policy.PostureAutonomous
		}
		for i := r.IntN(3); i > 0; i-- {
			p.Owner = append(p.Owner, randomRule(r, fmt.Sprintf("owner-%d", i)))
		}
		rules := []any{}
		for i := r.IntN(5); i > 0; i-- {
			b, _ := json.Marshal(randomRule(r, fmt.Sprintf("t-%d", i)))
			var m map[string]any
			_ = json.Unmarshal(b, &m)
			if m["action"] == policy.DecisionAllow && r.IntN(3) == 0 {
				delete(m, "action") // absent: allow, to both
			}
			rules = append(rules, m)
		}
		p.Policy = map[string]any{"alias": "policies/generated", "rules": rules}
		if d := pick(r, corpusDefaults); d != "" {
			p.Policy["default"] = d
		}
		p.WorkFolder = f.work
		p.Outbox = pick(r, corpusOutboxes)
		p.Call.Effect = pick(r, corpusEffects)
		switch p.Call.Effect {
		case policy.EffectExec:
			p.Call.Command = randomCommand(r)
		case policy.EffectRead, policy.EffectWrite:
			p.Call.Path = strings.NewReplacer("{work}", f.work, "{root}", f.root).Replace(pick(r, corpusPaths))
		}
		out = append(out, p)
	}
	return out
}

// bhwDecide is bhw-run's decision for a pair, through the same reading of
// the policy a thread's envelope gets.
func bhwDecide(t *testing.T, p pair) (policy.Decision, policy.Gate, policy.Call) {
	t.Helper()
	b, _ := json.Marshal(p.Policy)
	var pol policy.Policy
	if err := json.Unmarshal(b, &pol); err != nil {
		t.Fatalf("bhw-run refuses the generated policy %s: %v", b, err)
	}
	if err := pol.Validate(); err != nil {
		t.Fatalf("bhw-run refuses the generated policy %s: %v", b, err)
	}
	g := policy.Gate{Posture: p.Posture, Worker: p.Owner, Thread: pol, WorkFolder: p.WorkFolder, Outbox: p.Outbox}
	c := policy.Call{Tool: "Tool", Effect: p.Call.Effect, Kind: policy.KindApproval, Target: policy.Target{Command: p.Call.Command}}
	if p.Call.Path != "" {
		c.Target.Paths = []string{p.Call.Path}
	}
	return g.Decide(c), g, c
}

func rank(action string) int {
	switch action {
	case policy.DecisionAllow:
		return 0
	case policy.DecisionDeny:
		return 2
	}
	return 1
}

// whyStricter names the listed difference that explains a decision
// stricter than the worker's, or "" when none does.
func whyStricter(p pair, d policy.Decision, g policy.Gate, c policy.Call) string {
	ex := policy.Explain(g, c)
	switch {
	case p.Posture == policy.PostureApproval:
		return "approval-owner-deny"
	case strings.Contains(d.Reason, "cannot be judged one by one"), strings.Contains(ex, "does not parse as a shell line"), strings.Contains(ex, "over the gate's limits"):
		return "unsplit-line"
	case d.Reading != "":
		return "deeper-reading"
	case d.By != nil && d.By.Source == policy.SourceWorker && d.By.Rule.EffectiveAction() == policy.DecisionDeny:
		if p.Call.Effect == policy.EffectExec && !workerMatches(d.By.Rule, p.Call.Command) {
			return shellReason(d, p)
		}
		return "owner-deny-first"
	case d.Part != "":
		return "compound-part"
	case p.Call.Effect == policy.EffectRead || p.Call.Effect == policy.EffectWrite:
		return "path-two-readings"
	case d.By != nil && p.Call.Effect == policy.EffectExec && !workerMatches(d.By.Rule, p.Call.Command):
		return shellReason(d, p)
	}
	return ""
}

func shellReason(d policy.Decision, p pair) string {
	for _, c := range d.By.Rule.Command {
		if policy.MatchCommand(c, p.Call.Command) {
			return "whitespace-folded"
		}
	}
	return "shell-parts"
}

// workerMatches reports whether a deny/ask rule's globs match one of the
// worker's effective commands.
func workerMatches(r policy.Rule, command string) bool {
	for _, c := range policy.WorkerCommands(command) {
		for _, g := range r.Command {
			if ok, _ := policy.Fnmatch(g, c); ok {
				return true
			}
		}
	}
	return len(r.Command) == 0
}

// listedDifferences reads the ids of docs/gate.md's `differences` block.
func listedDifferences(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(agenttest.ModuleRoot(t), "docs", "gate.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```differences\n(.*?)```").FindSubmatch(b)
	if m == nil {
		t.Fatal("docs/gate.md has no ```differences block")
	}
	ids := map[string]bool{}
	for _, l := range strings.Split(string(m[1]), "\n") {
		if f := strings.Fields(l); len(f) > 0 && !strings.HasPrefix(f[0], "#") {
			ids[f[0]] = true
		}
	}
	return ids
}

// TestPolicyConformance judges the corpus both ways: 0 looser, and every
// stricter call explained by a difference docs/gate.md lists.
func TestPolicyConformance(t *testing.T) {
	f := newFixture(t)
	pairs := generate(f, corpusSize)
	lines := make([]any, len(pairs))
	for i := range pairs {
		lines[i] = pairs[i]
	}
	answers := judge(t, lines)
	listed := listedDifferences(t)
	var equal, stricter, looser int
	byWhy := map[string]int{}
	var failures []string
	for i, p := range pairs {
		w := answers[i]
		if w.Error != "" {
			t.Fatalf("the worker refuses generated pair %d: %s", i, w.Error)
		}
		d, g, c := bhwDecide(t, p)
		pj, _ := json.Marshal(p)
		switch {
		case d.Decision == w.Action:
			equal++
		case rank(d.Decision) < rank(w.Action):
			looser++
			failures = append(failures, fmt.Sprintf("LOOSER: bhw-run %s (%s), worker %s (rule %q, %s): %s", d.Decision, d.Reason, w.Action, w.Rule, w.Origin, pj))
		default:
			stricter++
			why := whyStricter(p, d, g, c)
			byWhy[why]++
			if why == "" || !listed[why] {
				failures = append(failures, fmt.Sprintf("stricter for a reason docs/gate.md does not list (%q): bhw-run %s (%s), worker %s (rule %q): %s", why, d.Decision, d.Reason, w.Action, w.Rule, pj))
			}
		}
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range byWhy {
			if !yield(k) {
				return
			}
		}
	})
	var whys []string
	for _, k := range keys {
		whys = append(whys, fmt.Sprintf("%s %d", k, byWhy[k]))
	}
	t.Logf("corpus %d pairs: equal %d, stricter %d (%s), looser %d", len(pairs), equal, stricter, strings.Join(whys, ", "), looser)
	sort.Strings(failures)
	for i, f := range failures {
		if i == 40 {
			t.Errorf("... and %d more", len(failures)-40)
			break
		}
		t.Error(f)
	}
	if looser != 0 {
		t.Errorf("%d calls where bhw-run is looser than blobhub-worker", looser)
	}
}

// TestPolicyWrittenLoadsInTheWorker: every policy bhw-run writes (a thread's
// through `thread new/edit --policy`, the examples it ships, the older
// spelling it rewrites) and contrib/config.example.yaml load through the
// worker's own models and validation, and the worker reads each rule as
// bhw-run does: the same id, effect, action, globs and outside, nothing
// wider.
func TestPolicyWrittenLoadsInTheWorker(t *testing.T) {
	root := agenttest.ModuleRoot(t)
	var docs [][]byte
	example, err := os.ReadFile(filepath.Join(root, "contrib", "policy.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, example,
		// bhw-run's older spelling, which it reads and writes anew.
		[]byte("rules:\n  - {effect: write, path: \"/etc/**\", decision: deny}\n  - {effect: exec, command: \"git push*\", decision: ask}\n  - {effect: write, path: \"/tmp/**\", decision: allow}\n  - {effect: network, decision: allow}\n"),
		[]byte("default: allow\nrules:\n  - {effect: read, path: \"/home/*/.ssh/**\", decision: deny}\n"),
		[]byte("rules: []\n"),
		[]byte("default: deny\nrules:\n  - {id: x, effect: exec, command: [\"git [!s]*\", \"rm -?f *\"]}\n  - {id: y, effect: write, action: ask, outside: outbox}\n"),
	)
	for _, p := range generate(newFixture(t), 300) {
		b, _ := json.Marshal(p.Policy)
		docs = append(docs, b)
	}
	var written []policy.Policy
	var lines []any
	for _, d := range docs {
		p, err := policy.ParsePolicy(d)
		if err != nil {
			t.Fatalf("bhw-run refuses %s: %v", d, err)
		}
		b, _ := json.Marshal(p)
		var block map[string]any
		if err := json.Unmarshal(b, &block); err != nil {
			t.Fatal(err)
		}
		written = append(written, p)
		lines = append(lines, map[string]any{"load_policy": block})
	}
	config, err := os.ReadFile(filepath.Join(root, "contrib", "config.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	lines = append(lines, map[string]any{"load_config": string(config)})
	answers := judge(t, lines)
	for i, p := range written {
		a := answers[i]
		if a.Error != "" || !a.OK {
			t.Errorf("the worker refuses the policy bhw-run writes for %s: %s", docs[i], a.Error)
			continue
		}
		var read struct {
			Alias   string `json:"alias"`
			Default string `json:"default"`
			Rules   []struct {
				ID      string   `json:"id"`
				Effect  string   `json:"effect"`
				Action  string   `json:"action"`
				Command []string `json:"command"`
				Outside string   `json:"outside"`
			} `json:"rules"`
		}
		b, _ := json.Marshal(a.Read)
		if err := json.Unmarshal(b, &read); err != nil {
			t.Fatal(err)
		}
		same := read.Default == p.DefaultDecision() && read.Alias == p.Alias && len(read.Rules) == len(p.Rules)
		for j := 0; same && j < len(p.Rules); j++ {
			r, w := p.Rules[j], read.Rules[j]
			same = r.ID == w.ID && r.Effect == w.Effect && r.EffectiveAction() == w.Action &&
				slices.Equal(r.Command, w.Command) && r.Outside == w.Outside
		}
		if !same {
			t.Errorf("the worker reads %s as %s; bhw-run as %+v", docs[i], b, p)
		}
	}
	if a := answers[len(answers)-1]; a.Error != "" || !a.OK {
		t.Errorf("the worker refuses contrib/config.example.yaml: %s", a.Error)
	}
}

// TestGlobAndSegmentsAsTheWorker: the port of the worker's matcher and
// command splitter (policy.Fnmatch, policy.WorkerCommands) answers as
// Python's fnmatchcase and the worker's segments.effective_commands do, on
// generated patterns full of sets, ranges and stray brackets, and on
// generated command lines.
func TestGlobAndSegmentsAsTheWorker(t *testing.T) {
	r := rand.New(rand.NewPCG(35, 1))
	alpha := []string{"a", "b", "z", "-", "!", "^", "[", "]", "*", "?", "\\", " ", "é", "&", "|", "~", "/"}
	word := func(n int) string {
		var b strings.Builder
		for i := r.IntN(n) + 1; i > 0; i-- {
			b.WriteString(pick(r, alpha))
		}
		return b.String()
	}
	type globCase struct{ pat, name string }
	var globs []globCase
	for range 8000 {
		globs = append(globs, globCase{word(8), word(6)})
	}
	var cmds []string
	for range 2000 {
		cmds = append(cmds, randomCommand(r))
	}
	for range 3000 {
		var b strings.Builder
		for i := r.IntN(12); i > 0; i-- {
			b.WriteString(pick(r, []string{"git", " ", "-C", "x", "=", "FOO=1", "'", "\"", "`", "$(", ")", "(", "{", "}", ";", "&", "&&", "|", "||", "\n", ">", "2>&1", "|&", "push", "\t", "\u00a0", "\u2003", "\x1c", "\v", "A_1=", "é"}))
		}
		cmds = append(cmds, b.String())
	}
	var lines []any
	for _, g := range globs {
		lines = append(lines, map[string]any{"fnmatch": []string{g.pat, g.name}})
	}
	for _, c := range cmds {
		lines = append(lines, map[string]any{"segments": c})
	}
	answers := judge(t, lines)
	bad := 0
	for i, g := range globs {
		a := answers[i]
		got, err := policy.Fnmatch(g.pat, g.name)
		if (err != nil) != (a.Error != "") || err == nil && got != a.OK {
			bad++
			if bad <= 20 {
				t.Errorf("fnmatchcase(%q, %q): worker %v %s, bhw-run %v %v", g.name, g.pat, a.OK, a.Error, got, err)
			}
		}
	}
	for i, c := range cmds {
		a := answers[len(globs)+i]
		var want []string
		b, _ := json.Marshal(a.Read)
		_ = json.Unmarshal(b, &want)
		if got := policy.WorkerCommands(c); !slices.Equal(got, want) {
			bad++
			if bad <= 40 {
				t.Errorf("effective_commands(%q): worker %q, bhw-run %q", c, want, got)
			}
		}
	}
	t.Logf("%d globs and %d command lines compared, %d differ", len(globs), len(cmds), bad)
}

// TestOutsideAsTheWorker: whether a path leaves the work folder or the
// outbox, as the worker's own PolicyEvaluator._leaves answers, for relative,
// `..`, symlinked, dangling and looping paths and every kind of outbox.
func TestOutsideAsTheWorker(t *testing.T) {
	f := newFixture(t)
	var lines []any
	type c struct{ path, outbox, root string }
	var cases []c
	for _, p := range corpusPaths {
		p = strings.NewReplacer("{work}", f.work, "{root}", f.root).Replace(p)
		for _, o := range corpusOutboxes {
			for _, root := range []string{policy.OutsideWorkFolder, policy.OutsideOutbox} {
				cases = append(cases, c{p, o, root})
				lines = append(lines, map[string]any{"leaves": p, "work_folder": f.work, "outbox": o, "root": map[string]string{policy.OutsideWorkFolder: "work", policy.OutsideOutbox: "outbox"}[root]})
			}
		}
	}
	answers := judge(t, lines)
	for i, k := range cases {
		th := policy.Policy{Default: policy.DecisionAllow, Rules: []policy.Rule{{ID: "x", Effect: policy.EffectWrite, Action: policy.DecisionDeny, Outside: k.root}}}
		call := policy.Call{Effect: policy.EffectWrite}
		if k.path != "" {
			call.Target.Paths = []string{k.path}
		}
		got := policy.WorkerDecide(nil, th, f.work, k.outbox, call).Action == policy.DecisionDeny
		if got != answers[i].OK {
			t.Errorf("path %q, outbox %q, outside %s: worker leaves=%v, bhw-run's port %v", k.path, k.outbox, k.root, answers[i].OK, got)
		}
	}
	t.Logf("%d (path, outbox, root) cases compared", len(cases))
}
