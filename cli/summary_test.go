package cli

import (
	"testing"

	"github.com/blobhub/bhw-run/run"
)

// TestSummaryLineCarriesTheMessage: the one line a person reads says why,
// as --json does, escaped for the terminal.
func TestSummaryLineCarriesTheMessage(t *testing.T) {
	cases := []struct {
		sum  run.Summary
		want string
	}{
		{run.Summary{Alias: "demo/t2", Outcome: run.OutcomeTurnFailed, ExitCode: 3, Error: &run.SummaryError{Code: "TURN_FAILED", Message: "Not logged in · Please run /login"}},
			"demo/t2: turn_failed (exit 3) TURN_FAILED: Not logged in · Please run /login"},
		{run.Summary{Alias: "demo/t1", Outcome: run.OutcomeParked}, "demo/t1: parked (exit 0)"},
		{run.Summary{Alias: "a", ExitCode: 64, Error: &run.SummaryError{Message: "bad"}}, "a: error (exit 64) bad"},
		// An agent's message cannot colour the terminal, move the cursor or
		// forge a second line.
		{run.Summary{Alias: "a", Outcome: run.OutcomeTurnFailed, ExitCode: 3, Error: &run.SummaryError{Code: "TURN_FAILED", Message: "x\x1b[2J\ra\nb: ok (exit 0)\u0085"}},
			`a: turn_failed (exit 3) TURN_FAILED: x\x1b[2J\x0da\x0ab: ok (exit 0)\u0085`},
	}
	for _, tc := range cases {
		if got := summaryLine(&tc.sum); got != tc.want {
			t.Errorf("summaryLine = %q, want %q", got, tc.want)
		}
	}
}
