package e2e

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/exit"
)

// TestModelUnreachableNamedAtOnce: an agent pointed at a model on this
// machine that is down (make model stopped) ends the run at once with
// MODEL_UNREACHABLE (78), naming the URL, the variable and `make model`,
// and the message waits for the next run; doctor says the same, and a
// model that is up passes. Before, the agent retried for minutes and the
// run ended "Connection refused" naming neither, doctor all ✓.
func TestModelUnreachableNamedAtOnce(t *testing.T) {
	e := newE2E(t)
	// An agent that would wait: only the probe before its start can end
	// the run in time.
	script := "#!/bin/sh\ncase \"$1\" in --version) echo '2.1.332 (Claude Code)';; *) sleep 120;; esac\n"
	e.scriptAgent(claudeType, "claude", script, 0o755)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	model := "http://" + l.Addr().String()
	l.Close() // nothing answers there now
	e.Env = append(e.Env, "ANTHROPIC_BASE_URL="+model, "ANTHROPIC_API_KEY=sk-ant-test", "BHW_MAX_DURATION=60s")

	alias := "demo/down"
	e.handOff(alias, claudeType, "approval", "the message that waits")
	start := time.Now()
	s := e.activate(alias, exit.Config, "")
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the run took %v to say the model is down", took)
	}
	if s.Error == nil || s.Error.Code != exit.CodeModelUnreachable {
		t.Fatalf("summary error %+v, want MODEL_UNREACHABLE", s.Error)
	}
	for _, want := range []string{model, "ANTHROPIC_BASE_URL", "connection refused", "make model"} {
		if !strings.Contains(s.Error.Message, want) {
			t.Errorf("the error %q does not name %q", s.Error.Message, want)
		}
	}
	if ty := e.threadYAML(alias); len(ty.Items.PendingInbound) != 1 || ty.Agent.Process != nil {
		t.Errorf("thread.yaml: pending inbound %v, process %v; want the message waiting and no agent started", ty.Items.PendingInbound, ty.Agent.Process)
	}

	_, out, _ := e.run("doctor")
	if line := lineWith(out, "agent claude_code model"); !strings.HasPrefix(line, "✗") || !strings.Contains(line, "MODEL_UNREACHABLE: "+model) || !strings.Contains(line, "make model") {
		t.Errorf("doctor's model line with the model down: %q\n%s", line, out)
	}
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	e.Env = append(e.Env, "ANTHROPIC_BASE_URL=http://"+up.Addr().String()) // the later one wins
	_, out, _ = e.run("doctor")
	if line := lineWith(out, "agent claude_code model"); !strings.HasPrefix(line, "✓") || !strings.Contains(line, up.Addr().String()) {
		t.Errorf("doctor's model line with the model up: %q", line)
	}
}
