package policy

import (
	"strings"
	"testing"
)

// A line past the gate's limits is decided without the cost of splitting it
// in full: at best ask, never allow; the machine owner's deny still wins
// where it can be judged (a command before the limit, or the line as one
// string); and while the owner has exec deny rules, a person's one-shot
// grant cannot approve a line that was never checked in full against them.
func TestOverLimit(t *testing.T) {
	r := strings.Repeat
	deep := "echo " + r("$(echo ", maxStmtDepth+1) + "x" + r(")", maxStmtDepth+1)
	lines := map[string]string{
		"10,000 nested $( )":            nested(10_000),
		"25,000 nested $( )":            nested(25_000),
		"100,000 nested $( )":           nested(100_000),
		"too many openers":              "echo " + r("(", maxOpeners/2+1) + r("{", maxOpeners/2),
		"too long":                      "echo " + r("x", maxLineBytes),
		"statements nested too deep":    deep,
		"too many commands":             r("true; ", maxParts+1),
		"readings too large":            "echo " + r("$(echo ", 20) + r("y", 60_000) + r(")", 20),
		"scripts in scripts too deep":   "bash -c \"bash -c 'bash -c \\\"bash -c \\\\\\\"bash -c true\\\\\\\"\\\"'\"",
		"a wrapper with too many words": "sudo " + r("-a ", 40_000) + "true",
		"wrappers in wrappers":          r("env -a ", 10_000) + "true",
		"brace expansions":              "echo " + r("{a,b}{c,d}{e,f}{g,h}{i,j}{k,l} ", 1_000),
	}
	allowAll := Gate{Posture: PostureGuarded, Thread: thread(DecisionAllow, exR("*", DecisionAllow))}
	ownerDeny := Gate{Posture: PostureGuarded, Worker: []Rule{exR("rm -rf *", DecisionDeny)}, Thread: thread(DecisionAllow)}
	for name, line := range lines {
		t.Run(name, func(t *testing.T) {
			if sp := splitLine(line); sp.over == "" {
				t.Fatalf("not over a limit (%d parts, %d bytes)", len(sp.parts), sp.bytes)
			}
			c := bash(line)
			d := allowAll.Decide(c)
			if d.Decision != DecisionAsk || !strings.Contains(d.Reason, "over the gate's limits") {
				t.Errorf("decision = %s (%s), want ask for a line over the limits", d.Decision, d.Reason)
			}
			// Without owner deny rules a person may approve it ...
			granted := allowAll
			granted.Grants = []string{c.Fingerprint}
			if d := granted.Decide(c); d.Decision != DecisionAllow || !d.Granted {
				t.Errorf("granted, no owner deny: %s (%s), want allow", d.Decision, d.Reason)
			}
			// ... but not past owner deny rules it was never checked against.
			ownerGranted := ownerDeny
			ownerGranted.Grants = []string{c.Fingerprint}
			if d := ownerGranted.Decide(c); d.Decision != DecisionAsk {
				t.Errorf("granted, owner deny: %s (%s), want ask", d.Decision, d.Reason)
			}
			if ex := Explain(ownerGranted, c); !strings.Contains(ex, "over the gate's limits") || !strings.Contains(ex, "one-shot grant: not for this line") {
				t.Errorf("explain does not say why:\n%s", ex)
			}
		})
	}

	// The owner's deny wins where it can be judged: a command before the
	// limit, or the line as one string.
	for _, tc := range []struct{ line, pattern, part string }{
		{"rm -rf /; " + deep, "rm -rf *", "rm -rf /"},
		{`\rm -rf /; ` + nested(10_000), "rm -rf *", `\rm -rf /`},
		{`X=1 rm -rf /; echo ` + strings.Repeat("x", maxLineBytes), "rm -rf *", `X=1 rm -rf /`},
		{nested(25_000), "echo $($($(*", ""},
		{"rm -rf " + strings.Repeat("x", maxLineBytes), "rm -rf *", ""},
	} {
		g := Gate{Posture: PostureGuarded, Worker: []Rule{exR(tc.pattern, DecisionDeny)}, Thread: thread(DecisionAllow)}
		c := bash(tc.line)
		g.Grants = []string{c.Fingerprint}
		d := g.Decide(c)
		if d.Decision != DecisionDeny || d.By == nil || d.By.Source != SourceWorker || tc.part != "" && d.Part != tc.part {
			t.Errorf("%.40q…: %s (%s), want deny by the worker rule for %q", tc.line, d.Decision, d.Reason, tc.part)
		}
	}
}

// Realistic command lines, long ones included, stay inside every limit and
// split normally.
func TestRealisticLinesSplit(t *testing.T) {
	r := strings.Repeat
	code := r("def f(x):\n    return [x, {'k': (x or None)}] if x != 0 else f(x - 1)  # why? because!\n", 330)
	lines := []string{
		"git commit -m \"$(cat <<'EOF'\nFix the gate\n\n" + r("A longer explanation of the change, wrapped at a sane width.\n", 60) + "EOF\n)\"",
		"cat > big.txt <<'EOF'\n" + r("plain text of a file written through a here-document\n", 2_400) + "EOF",
		"python3 - <<'EOF'\n" + code + "EOF",
		r("go test ./pkg/x && ", 500) + "echo done",
		r("echo a | ", 300) + "cat",
		"for f in $(git ls-files '*.go'); do gofmt -l \"$f\" || exit 1; done",
		"cd \"$(git rev-parse --show-toplevel)\" && make test 2>&1 | tail -n 50",
		"find . -name '*.go' -not -path './vendor/*' -print0 | xargs -0 grep -l 'TODO' | sort | uniq -c",
		"if [ -f go.mod ]; then (cd sub && go build ./... && { go vet ./... || true; }); fi",
		"bash -lc 'set -euo pipefail; npm ci && npm test -- --runInBand'",
		"sudo -u build env -i PATH=/usr/bin:/bin HOME=/home/build timeout 600 make -j4 release",
	}
	for _, line := range lines {
		sp := splitLine(line)
		if sp.over != "" || sp.unparsed || len(sp.parts) == 0 {
			t.Errorf("%.60q… (%d bytes): over %q, unparsed %v, %d parts", line, len(line), sp.over, sp.unparsed, len(sp.parts))
		}
	}
	if len(lines[1]) < 100_000 || len(lines[2]) < 25_000 {
		t.Fatalf("the long lines are not long: %d, %d", len(lines[1]), len(lines[2]))
	}
}

// A brace expansion that would make more words than the gate reads is an
// unknown word, not a million known ones.
func TestBraceBomb(t *testing.T) {
	sp := splitLine("echo " + strings.Repeat("{a,b}", 22) + " {1..10000000}")
	if sp.over != "" || len(sp.parts) != 1 || sp.parts[0].words == nil {
		t.Fatalf("over %q, %d parts", sp.over, len(sp.parts))
	}
	if got := sp.parts[0].words.text(); len(got) > 200 || !sp.parts[0].words.wild() {
		t.Errorf("words read %.80q… (%d bytes), want the brace words unknown", got, len(got))
	}
	if sp := splitLine("echo {a,b}{1..3}"); sp.parts[0].words.text() != "echo a1 a2 a3 b1 b2 b3" {
		t.Errorf("a small brace expansion reads %q", sp.parts[0].words.text())
	}
}
