package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRunOffATerminal: a run whose stderr is a pipe (cron, systemd, CI)
// writes no status line and no escape sequence; -v logs each item posted
// as a debug record, in the log's format.
func TestRunOffATerminal(t *testing.T) {
	e := pipelineEnv(t)
	e.handOff("pipe/t1", claudeType, "", "hello")
	e.handOff("pipe/t2", claudeType, "", "hello")
	for _, tc := range []struct {
		alias   string
		args    []string
		records int
	}{{"pipe/t1", nil, 0}, {"pipe/t2", []string{"-v"}, 2}} {
		code, _, stderr := e.run(append(tc.args, tc.alias)...)
		if code != 0 {
			t.Fatalf("%s: exit %d", tc.alias, code)
		}
		if strings.Contains(stderr, "\x1b[") || strings.Contains(stderr, "\r") || strings.Contains(stderr, "⋯") {
			t.Errorf("%s: a status line or an escape sequence off a terminal:\n%q", tc.alias, stderr)
		}
		n := 0
		for line := range strings.SplitSeq(strings.TrimSpace(stderr), "\n") {
			if line == "" {
				continue // a quiet run logs nothing
			}
			var rec struct {
				Msg, Level, Type, Thread string
			}
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("%s: a stderr line that is no JSON record: %q", tc.alias, line)
			}
			if rec.Msg == "item posted" {
				n++
				if rec.Level != "DEBUG" || rec.Thread != tc.alias || rec.Type == "" {
					t.Errorf("%s: item record %+v", tc.alias, rec)
				}
			}
		}
		if n != tc.records {
			t.Errorf("%s %v: %d item records, want %d (text, turn_end)", tc.alias, tc.args, n, tc.records)
		}
	}
}
