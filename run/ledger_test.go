package run

import (
	"testing"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/envelope"
)

// TestLedgerBounded: the ledger keeps the last LedgerActivations runs one
// by one and the total of all.
func TestLedgerBounded(t *testing.T) {
	a := &activation{rec: &record{t: &envelope.Thread{}}}
	n := envelope.LedgerActivations + 5
	for i := 0; i < n; i++ {
		a.rec.t.Turn.StartedAt = string(rune('a' + i))
		a.recordSpend(agent.TurnResult{CostUSD: 0.5, NumTurns: 2, Usage: agent.Usage{InputTokens: 10, OutputTokens: 1}, DurationMS: 100})
	}
	l := a.rec.t.Ledger
	if len(l.Activations) != envelope.LedgerActivations || l.Activations[0].At != string(rune('a'+5)) {
		t.Fatalf("%d activations, first %q; want the last %d", len(l.Activations), l.Activations[0].At, envelope.LedgerActivations)
	}
	want := envelope.Spend{CostUSD: 0.5 * float64(n), InputTokens: int64(10 * n), OutputTokens: int64(n), AgentTurns: int64(2 * n), WallMS: int64(100 * n), Activations: int64(n)}
	if l.Total != want {
		t.Errorf("total %+v, want %+v", l.Total, want)
	}
}
