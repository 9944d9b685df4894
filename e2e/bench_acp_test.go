//go:build realcli

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/acp/acptest"
	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/setup"
)

// BenchmarkE2EACPTurnOverhead runs, per agent and per iteration, one
// autonomous activation with a one-tool turn (a write, then a final text)
// of a new thread through the built bhw-run and the real CLI, and reports
// the medians overheadRuns says (the CLI's as agent-cpu-ms/op and
// agent-rss-MB, the peak RSS of its largest process), and of first-item-ms:
// from the prompt bhw-run sent (its stdin line in thread.log) to the first
// item it relayed (its "run emit" line).
//
//	go test -run '^$' -bench E2EACPTurnOverhead -benchtime 5x .
func BenchmarkE2EACPTurnOverhead(b *testing.B) {
	for _, a := range acptest.Agents {
		b.Run(a.Type, func(b *testing.B) { benchACPTurn(b, a) })
	}
}

func benchACPTurn(b *testing.B, a *acptest.Agent) {
	e := newACPE2E(b, a, false)
	report := e.rusageReport()
	ac := e.agentConfig(a.Type)
	ac.Executable = rusageWrapBin
	ac.Env = map[string]string{rusageWrapperEnv: a.Bin(b) + "," + report}
	e.writeConfig()

	var runs overheadRuns
	var first []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		alias := fmt.Sprintf("bench/%s-%d", a.Type, i)
		e.handOff(alias, a.Type, "autonomous", a.Write(e.file(fmt.Sprintf("b%d.txt", i)), "bench\n"))
		runs.timed(b, e.e2eEnv, alias, report)
		first = append(first, ms(firstItem(b, e, alias)))
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(medianOf(first), "first-item-ms")
	runs.report(b, "agent")
}

// firstItem is, in alias's thread.log, the time from the prompt bhw-run
// sent to the first item it relayed from the agent.
func firstItem(b *testing.B, e *acpE2E, alias string) time.Duration {
	raw, err := os.ReadFile(filepath.Join(setup.ThreadDir(e.jobDir(), alias), "logs", "thread.log"))
	if err != nil {
		b.Fatal(err)
	}
	var sent time.Time
	for _, line := range strings.Split(string(raw), "\n") {
		at, stream, text, ok := agent.ParseLogLine(line)
		switch {
		case !ok:
		case stream == agent.StreamStdin && strings.Contains(text, `"method":"session/prompt"`):
			sent = at
		case !sent.IsZero() && stream == agent.StreamRun && strings.HasPrefix(text, "emit ") &&
			(strings.Contains(text, " tool_call ") || strings.Contains(text, " text ") || strings.Contains(text, " thinking ")):
			return at.Sub(sent)
		}
	}
	b.Fatalf("no prompt and item in %s's thread.log", alias)
	return 0
}
