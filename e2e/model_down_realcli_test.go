//go:build realcli

package e2e

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/blobhub/bhw-run/claude/claudetest"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/run"
)

// forward is a model that can go down and come back on the same address:
// a TCP forwarder to the scripted model server, whose script survives it.
type forward struct {
	t      *testing.T
	addr   string
	target string
	mu     sync.Mutex
	l      net.Listener
	conns  []net.Conn
}

func (f *forward) up() {
	f.t.Helper()
	l, err := net.Listen("tcp", f.addr)
	if err != nil {
		f.t.Fatal(err)
	}
	f.addr, f.l = l.Addr().String(), l
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", f.target)
			if err != nil {
				c.Close()
				continue
			}
			f.mu.Lock()
			f.conns = append(f.conns, c, u)
			f.mu.Unlock()
			go func() { _, _ = io.Copy(u, c); u.Close() }()
			go func() { _, _ = io.Copy(c, u); c.Close() }()
		}
	}()
}

func (f *forward) down() {
	f.l.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		c.Close()
	}
	f.conns = nil
}

// TestE2EClaudeModelDownAtTheApproval: the walkthrough's model is stopped
// between the park and the person's "yes". The run after the answer ends
// at once MODEL_UNREACHABLE, starting no agent and leaving the answer
// unread; once the model is back, the next run delivers the approval and
// the turn completes with the approved write, resolved once.
func TestE2EClaudeModelDownAtTheApproval(t *testing.T) {
	e := newClaudeE2E(t)
	f := &forward{t: t, addr: "127.0.0.1:0", target: strings.TrimPrefix(e.model.URL, "http://")}
	f.up()
	t.Cleanup(f.down)
	e.agentConfig(claudeType).Env["ANTHROPIC_BASE_URL"] = "http://" + f.addr
	e.writeConfig()
	const alias = "projects/p1/claude-model-down"
	x := e.parkOnWrite(alias, writeTool(e.path("x.txt"), "approved content"), claudetest.Text("written"))

	f.down()
	e.post(alias, "yes")
	sum := e.activate(alias, exit.Config, "")
	if sum.Error == nil || sum.Error.Code != exit.CodeModelUnreachable || !strings.Contains(sum.Error.Message, "http://"+f.addr) {
		t.Fatalf("the run with the model down: %+v, want MODEL_UNREACHABLE naming http://%s", sum.Error, f.addr)
	}
	if th := e.threadYAML(alias); th.Prompt == nil || len(th.Grants) != 0 {
		t.Fatalf("the answer was read while the model was down: prompt %+v grants %v", th.Prompt, th.Grants)
	}
	fileAbsent(t, x)

	f.up()
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	fileIs(t, x, "approved content")
	if m := e.resolved(alias); m.Decision != "approved" {
		t.Errorf("pending_prompt_resolved decision %q, want approved", m.Decision)
	}
}
