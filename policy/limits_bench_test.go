package policy

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// nested is one Bash line nesting n command substitutions: echo $($(…x…)).
func nested(n int) string {
	return "echo " + strings.Repeat("$(", n) + "x" + strings.Repeat(")", n)
}

// benchDecide runs Decide on c in a fresh goroutine each time, and reports
// besides B/op the stack that goroutine grew to (the parser recurses, and
// stack is not in B/op): stack-B/op is the largest growth seen.
func benchDecide(b *testing.B, g Gate, c Call) {
	b.ReportAllocs()
	var most uint64
	for b.Loop() {
		done := make(chan uint64)
		go func() {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_ = g.Decide(c)
			runtime.ReadMemStats(&after)
			done <- after.StackInuse - min(before.StackInuse, after.StackInuse)
		}()
		most = max(most, <-done)
	}
	b.ReportMetric(float64(most), "stack-B/op")
}

// BenchmarkDecideNested: the gate's cost for one hostile line of 10,000,
// 25,000 and 100,000 nested $( ) stays bounded and grows no faster than the
// line (compare B/op and ns/op between the sizes). "4000" is just inside the
// count of openers the parser is given, so it parses and stops at the
// statement depth; "subshells" is the deepest the parser may go (4,096
// nested `(`, its costliest level).
func BenchmarkDecideNested(b *testing.B) {
	g := Gate{Posture: PostureGuarded, Worker: []Rule{exR("rm -rf *", DecisionDeny)}, Thread: thread(DecisionAllow)}
	for _, n := range []int{4_000, 10_000, 25_000, 100_000} {
		c := bash(nested(n))
		b.Run(strconv.Itoa(n), func(b *testing.B) { benchDecide(b, g, c) })
	}
	c := bash(strings.Repeat("(", maxOpeners) + "x" + strings.Repeat(")", maxOpeners))
	b.Run("subshells", func(b *testing.B) { benchDecide(b, g, c) })
}

// BenchmarkDecideLarge: lines at the edge of what is realistic still split
// and cost little: a 100 KB here-document written to a file, a chain of 1,000
// commands, and 30 levels of substitutions in subshells under a wrapper.
func BenchmarkDecideLarge(b *testing.B) {
	g := Gate{Posture: PostureGuarded, Worker: []Rule{exR("rm -rf *", DecisionDeny), exR("git push --force*", DecisionDeny)},
		Thread: thread(DecisionAllow, exR("go test *", DecisionAllow))}
	lines := map[string]string{
		"heredoc": "cat > notes.txt <<'EOF'\n" + strings.Repeat("a line of notes about the change, with words and numbers 12345\n", 1600) + "EOF",
		"chain":   strings.Repeat("go test ./pkg/x && ", 999) + "echo done",
		"mixed":   "sudo env X=1 echo " + strings.Repeat("$( ( echo ", 30) + `"$HOME"/bin/tool -x` + strings.Repeat(") )", 30),
	}
	for name, line := range lines {
		c := bash(line)
		if d := g.Decide(c); d.Decision != DecisionAllow {
			b.Fatalf("%s: %s (%s)", name, d.Decision, d.Reason)
		}
		b.Run(name, func(b *testing.B) { benchDecide(b, g, c) })
	}
}

// BenchmarkDecideHostile: other lines built to cost the gate much stay
// bounded too: brace expansions that multiply, a wrapper with a long tail of
// options, wrappers inside wrappers, and 1,025 commands.
func BenchmarkDecideHostile(b *testing.B) {
	g := Gate{Posture: PostureGuarded, Worker: []Rule{exR("rm -rf *", DecisionDeny)}, Thread: thread(DecisionAllow)}
	r := strings.Repeat
	lines := map[string]string{
		"braces":   "echo " + r("{a,b}{c,d}{e,f}{g,h}{i,j}{k,l} ", 1_000),
		"bomb":     r("echo "+r("{a,b}", 22)+"; ", 100),
		"options":  "sudo " + r("-a ", 40_000) + "true",
		"wrappers": r("env -a ", 10_000) + "true",
		"commands": r("true; ", maxParts+1),
	}
	for name, line := range lines {
		c := bash(line)
		b.Run(name, func(b *testing.B) { benchDecide(b, g, c) })
	}
}

// BenchmarkDecideTypical: a guarded call as agents send them, a compound
// git line against a handful of rules, both readings (bhw-run's and the
// worker's).
func BenchmarkDecideTypical(b *testing.B) {
	g := Gate{Posture: PostureGuarded, Worker: []Rule{exR("rm -rf *", DecisionDeny)},
		Thread: thread(DecisionAsk, exR("git push*", DecisionDeny), exR("go test *", DecisionAllow), exR("git status*", DecisionAllow))}
	c := bash("git -C /repo status --short && go test ./... 2>&1 | tail -20")
	for b.Loop() {
		g.Decide(c)
	}
}
