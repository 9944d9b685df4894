package acp

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/blobhub/bhw-run/agent"
)

// How the agents report a provider's refusal of a failed turn, as recorded
// in testdata/acp/<agent>/errors.jsonl and limits.jsonl: Gemini CLI's
// JSON-RPC error code is the HTTP status (429, 401, 403) and its message
// the API's body; Qwen Code's is -32603 with data.details "<status>
// <message>" (its last 429 "Rate limit exceeded"); OpenCode's is -32603
// APIError with the API's message and no status; Copilot ends the turn
// end_turn with an "Error: …" notice naming "(HTTP 401)" or the limit.
var (
	// statusRe finds an HTTP status the text names: "(HTTP 401)",
	// "status 429", "code 429", or the "401 " that leads Qwen Code's
	// details and Copilot's "Last error: ".
	statusRe = lazyRegexp(`(?i)(?:^|: |\bHTTP[ /]?|\bstatus(?: code)?:? |\bcode:? |"code":)(401|403|429)\b`)
	// limitWords and authWords are the texts of the limits and refused
	// keys the APIs' bodies carry when no status is named (OpenCode).
	limitWords = []string{"rate limit", "rate_limit", "too many requests", "resource_exhausted", "quota exceeded",
		"exceeded your current quota", "usage limit"}
	authWords = []string{"api key not valid", "incorrect api key", "invalid api key", "invalid_api_key", "unauthenticated",
		"unauthorized", "authentication failed", "permission_denied", "api key may not be used", "invalid x-api-key"}
	// hintRe finds the reset an API or agent names: "Suggested retry
	// after 30s.", "try again in 20s", "retryDelay":"3600s".
	hintRe = lazyRegexp(`(?i)(?:retry after|retry in|try again in|retryDelay"?:\s*"?)\s*((?:[0-9]+(?:\.[0-9]+)?(?:ms|h|m|s))+)\b`)
)

// minResetHint: a shorter hint is the delay of one retry, which the agents
// wait out themselves (each of the four honours a 2 s reset and retries),
// not the reset of the provider's window; run then waits its own while.
const minResetHint = time.Minute

// refusal says whether a failed turn's text (its error, with the JSON-RPC
// code when the agent gave one, 0 otherwise) is a provider's rate limit
// (agent.FailureRateLimit, with the reset the text names, at least
// minResetHint from now) or a refused key (agent.FailureAuth); "" for
// another failure.
func refusal(text string, code int64, now time.Time) (failure string, reset time.Time) {
	var status int64
	if code == 401 || code == 403 || code == 429 {
		status = code
	} else if m := statusRe().FindStringSubmatch(text); m != nil {
		n, _ := strconv.Atoi(m[1])
		status = int64(n)
	}
	lower := strings.ToLower(text)
	switch {
	case status == 429 || (status == 0 && containsAny(lower, limitWords)):
		return agent.FailureRateLimit, resetHint(text, now)
	case status == 401 || status == 403 || containsAny(lower, authWords):
		return agent.FailureAuth, time.Time{}
	}
	return "", time.Time{}
}

// resetHint is now plus the longest reset hint the text names, when that
// is at least minResetHint; zero otherwise.
func resetHint(text string, now time.Time) time.Time {
	var longest time.Duration
	for _, m := range hintRe().FindAllStringSubmatch(text, -1) {
		if d, err := time.ParseDuration(m[1]); err == nil && d > longest {
			longest = d
		}
	}
	if longest < minResetHint {
		return time.Time{}
	}
	return now.Add(longest).Truncate(time.Second)
}

func containsAny(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// lazyRegexp compiles expr on first use: compiled at start, every bhw-run
// process (idle runs and ls too) would pay for the ACP adapter's patterns.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
