package e2e

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/antigravity/agytest"
	"github.com/blobhub/bhw-run/policy"
)

// BenchmarkE2EAntigravityTurnOverhead runs, per iteration, one guarded
// activation of a new thread through the built bhw-run and the stand-in
// agy: a write and a command, each put to the gate through agy's hook
// (bhw-run's agy-gate), then a final text; it reports the medians
// overheadRuns says, the stand-in's as agy-cpu-ms/op and agy-rss-MB. The
// hook processes are agy's children, so their CPU counts as agy's.
//
//	go test -run '^$' -bench E2EAntigravityTurnOverhead -benchtime 5x ./e2e/
func BenchmarkE2EAntigravityTurnOverhead(b *testing.B) {
	e := &agyE2E{e2eEnv: newE2E(b)}
	var turns [][]agenttest.Step
	for i := 0; i < 200; i++ {
		turns = append(turns, []agenttest.Step{
			{Call: agenttest.Write(filepath.Join(e.work, fmt.Sprintf("b%d.txt", i)))},
			{Call: agenttest.Exec("echo bench")}, {Text: "done"}})
	}
	exe, _, script := agytest.Command(b, agenttest.Script{Turns: turns})
	report := e.rusageReport()
	ac := e.agentConfig(agyType)
	ac.Executable = rusageWrapBin
	ac.Env = map[string]string{rusageWrapperEnv: exe + "," + report, agytest.ScriptEnv: script}
	e.writeConfig()
	e.signedIn()
	pol := &policy.Policy{Default: policy.DecisionDeny, Rules: []policy.Rule{
		{ID: "write-outside", Effect: policy.EffectWrite, Action: policy.DecisionDeny, Outside: policy.OutsideWorkFolder},
		{ID: "write", Effect: policy.EffectWrite, Action: policy.DecisionAllow},
		{Effect: policy.EffectExec, ID: "echo", Command: []string{"echo *"}, Action: policy.DecisionAllow}}}
	var runs overheadRuns
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		alias := fmt.Sprintf("bench/agy-%d", i)
		e.handOffGuarded(alias, agyType, pol, "write and run")
		runs.timed(b, e.e2eEnv, alias, report)
		b.StartTimer()
	}
	b.StopTimer()
	runs.report(b, "agy")
}
