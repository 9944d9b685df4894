package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/acp/acptest"
	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/run"
)

// BenchmarkE2EACPTurnOverhead runs, per agent and per iteration, one
// autonomous activation with a one-tool turn (a write, then a final text)
// of a new thread through the built bhw-run and the real CLI, and reports
// the medians of:
//
//   - first-item-ms: from the prompt bhw-run sent (its stdin line in
//     thread.log) to the first item it relayed (its "run emit" line);
//
//   - wall-ms: the whole activation;
//
//   - agent-cpu-ms, agent-rss-MB: the CLI runs under the rusage wrapper
//     (testdata/rusagewrap as agents.<type>.executable), which reports the CLI's
//     user+system time (with the descendants it waited for) and the peak
//     RSS of its largest process, as wait4 sees them;
//
//   - bhw-cpu-ms: bhw-run's own user+system time, its ProcessState minus
//     what the wrapper accounted for (the CLI and the wrapper itself);
//
//   - bhw-rss-MB: bhw-run's VmHWM, sampled from /proc while it runs;
//
//   - bhw-cpu-%: bhw-cpu-ms as a share of agent-cpu-ms.
//
//     go test -run '^$' -bench E2EACPTurnOverhead -benchtime 5x .
func BenchmarkE2EACPTurnOverhead(b *testing.B) {
	for _, a := range acptest.Agents {
		b.Run(a.Type, func(b *testing.B) { benchACPTurn(b, a) })
	}
}

func benchACPTurn(b *testing.B, a *acptest.Agent) {
	e := newACPE2E(b, a, false)
	report := filepath.Join(e.root, "rusage.json")
	ac := e.agentConfig(a.Type)
	ac.Executable = rusageWrapBin
	ac.Env = map[string]string{rusageWrapperEnv: a.Bin(b) + "," + report}
	e.writeConfig()

	var first, wall, bhwCPU, bhwRSS, agentCPU, agentRSS, share []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		alias := fmt.Sprintf("bench/%s-%d", a.Type, i)
		e.handOff(alias, a.Type, "autonomous", a.Write(e.file(fmt.Sprintf("b%d.txt", i)), "bench\n"))
		b.StartTimer()
		r := e.runWrapped(b, alias, report)
		b.StopTimer()
		if s := parseSummary(b, r.stdout); r.code != 0 || s.Outcome != run.OutcomeTurnCompleted {
			b.Fatalf("exit %d outcome %s\n%s", r.code, s.Outcome, tail(r.stderr, 3000))
		}
		first = append(first, ms(firstItem(b, e, alias)))
		wall = append(wall, ms(r.wall))
		bhwCPU = append(bhwCPU, ms(r.bhwCPU))
		agentCPU = append(agentCPU, ms(r.agentCPU))
		share = append(share, 100*ms(r.bhwCPU)/ms(r.agentCPU))
		bhwRSS = append(bhwRSS, float64(r.bhwRSSKB)/1024)
		agentRSS = append(agentRSS, float64(r.agentRSSKB)/1024)
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(medianOf(first), "first-item-ms")
	b.ReportMetric(medianOf(wall), "wall-ms")
	b.ReportMetric(medianOf(bhwCPU), "bhw-cpu-ms")
	b.ReportMetric(medianOf(agentCPU), "agent-cpu-ms")
	b.ReportMetric(medianOf(share), "bhw-cpu-%")
	b.ReportMetric(medianOf(bhwRSS), "bhw-rss-MB")
	b.ReportMetric(medianOf(agentRSS), "agent-rss-MB")
}

// firstItem is, in alias's thread.log, the time from the prompt bhw-run
// sent to the first item it relayed from the agent.
func firstItem(b *testing.B, e *acpE2E, alias string) time.Duration {
	raw, err := os.ReadFile(filepath.Join(run.ThreadDir(e.jobDir(), alias), "logs", "thread.log"))
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
