package run

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/policy"
)

// turnRetryDelays are the waits before the first, second and third resume
// (the worker's).
var turnRetryDelays = []time.Duration{15 * time.Second, 60 * time.Second, 180 * time.Second}

// RetryDelaysEnv shortens those waits for tests: milliseconds, comma
// separated ("10,10,10"). Not a setting: nothing documents it to users.
const RetryDelaysEnv = "BHW_TEST_TURN_RETRY_DELAYS"

// resumeAfterAPIError is what the resumed agent is told.
const resumeAfterAPIError = "Your previous response was cut off by a temporary API error. Continue exactly where you left off; do not repeat what you already did."

// retryDelay is the wait before resume n (1-based).
func retryDelay(n int) time.Duration {
	delays := turnRetryDelays
	if s := os.Getenv(RetryDelaysEnv); s != "" {
		var custom []time.Duration
		for _, f := range strings.Split(s, ",") {
			ms, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || ms < 0 {
				custom = nil
				break
			}
			custom = append(custom, time.Duration(ms)*time.Millisecond)
		}
		if len(custom) > 0 {
			delays = custom
		}
	}
	return delays[min(n-1, len(delays)-1)]
}

// retryTransient resumes, in the same agent session, a turn the agent
// ended with a transient API error (a server error, or one it could not
// class), up to agents.<type>.turn_retries times (setup.Config.TurnRetries)
// after turnRetryDelays, as the worker does: a retrying status item before
// each wait says so. The turn stays
// one turn: one turn_end, its usage summed over the attempts, each item
// posted once (each attempt's own). It stops when a resume would not end
// before --max-duration's deadline, and returns the last attempt's
// result (or the error that stopped it).
func (a *activation) retryTransient(ctx context.Context, l *launch, gate policy.Gate, tally *toolTally, result agent.TurnResult, err error) (agent.TurnResult, error) {
	turnRetries := a.r.Setup.Config.TurnRetries(l.adapter.Type)
	for n := 1; err == nil && result.Outcome == agent.TurnFailed && result.Failure == agent.FailureTransient && n <= turnRetries; n++ {
		delay := retryDelay(n)
		if !a.agentTurn.deadline.IsZero() && time.Until(a.agentTurn.deadline) <= delay {
			a.logf("no resume after the transient API error: --max-duration ends the turn first")
			break
		}
		line := fmt.Sprintf("transient API error, resuming (attempt %d/%d in %gs): %s", n, turnRetries, delay.Seconds(), firstLine(result.ErrorText))
		a.emit(agent.StatusItem("retrying", line, nil))
		select {
		case <-ctx.Done():
			return result, ctx.Err()
		case <-time.After(delay):
		}
		prev := result
		result, err = a.runAgent(ctx, l, gate, resumeAfterAPIError, turnPlan{}, tally)
		result.Usage.InputTokens += prev.Usage.InputTokens
		result.Usage.InputTokensCached += prev.Usage.InputTokensCached
		result.Usage.OutputTokens += prev.Usage.OutputTokens
		result.CostUSD += prev.CostUSD
		result.NumTurns += prev.NumTurns
		result.DurationMS += prev.DurationMS + delay.Milliseconds()
		if result.UsageTotal == nil {
			result.UsageTotal = prev.UsageTotal
		}
	}
	return result, err
}

// firstLine is s up to its first line break.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
