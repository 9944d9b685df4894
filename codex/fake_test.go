package codex

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/policy"
)

// The test binary doubles as a tiny fake app-server for the cases the real
// CLI cannot be made to show on demand (a crash mid-turn, an over-long
// server request). BHW_FAKE_CODEX selects the scenario.
func TestMain(m *testing.M) {
	if sc := os.Getenv("BHW_FAKE_CODEX"); sc != "" {
		os.Exit(fakeAppServer(sc))
	}
	os.Exit(m.Run())
}

func fakeAppServer(scenario string) int {
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	send := func(v any) {
		b, _ := json.Marshal(v)
		out.Write(append(b, '\n'))
		out.Flush()
	}
	next := func() map[string]any {
		line, err := in.ReadBytes('\n')
		if err != nil {
			os.Exit(0) // stdin closed: exit like codex does
		}
		var m map[string]any
		_ = json.Unmarshal(line, &m)
		return m
	}
	completed := func(status, msg string) {
		turn := map[string]any{"id": "t1", "status": status, "error": nil}
		if msg != "" {
			turn["error"] = map[string]any{"message": msg}
		}
		send(map[string]any{"method": "turn/completed", "params": map[string]any{"threadId": "th1", "turn": turn}})
	}
	for {
		m := next()
		id, method := m["id"], m["method"]
		switch method {
		case "initialize":
			send(map[string]any{"id": id, "result": map[string]any{}})
		case "thread/start", "thread/resume":
			send(map[string]any{"id": id, "result": map[string]any{"thread": map[string]any{"id": "th1"}}})
		case "turn/start":
			send(map[string]any{"id": id, "result": map[string]any{"turn": map[string]any{"id": "t1", "status": "inProgress"}}})
			send(map[string]any{"method": "turn/started", "params": map[string]any{"threadId": "th1", "turn": map[string]any{"id": "t1"}}})
			switch scenario {
			case "crash":
				fmt.Fprintln(os.Stderr, "fake: dying mid-turn")
				return 3
			case "longline":
				// An approval request far over the limit, then an unknown
				// server request: both must be answered.
				send(map[string]any{"method": methodCommandApproval, "id": 7, "params": map[string]any{
					"threadId": "th1", "turnId": "t1", "itemId": "call_1", "command": strings.Repeat("x", 4096),
				}})
				a := next()
				send(map[string]any{"method": "item/tool/requestUserInput", "id": 8, "params": map[string]any{"threadId": "th1"}})
				b := next()
				res, _ := a["result"].(map[string]any)
				switch {
				case fmt.Sprint(a["id"]) != "7" || res["decision"] != "decline":
					completed("failed", fmt.Sprintf("over-long approval answered %v", a))
				case fmt.Sprint(b["id"]) != "8" || b["error"] == nil:
					completed("failed", fmt.Sprintf("unknown request answered %v", b))
				default:
					completed("completed", "")
				}
			}
		}
	}
}

func fakeLaunch(t *testing.T, scenario string) agent.Launch {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return agent.Launch{
		Executable: exe, WorkFolder: t.TempDir(),
		Env:         []string{"BHW_FAKE_CODEX=" + scenario, "PATH=/usr/bin:/bin"},
		Permissions: "approval",
		Log:         (&agenttest.LogBuffer{}).Log(),
	}
}

func TestFakeCrashMidTurnIsAgentCrashed(t *testing.T) {
	s, err := Start(context.Background(), fakeLaunch(t, "crash"))
	if err != nil {
		t.Fatal(err)
	}
	defer closeNow(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = s.Turn(ctx, "hi", &recorder{})
	e := asEnvelopeError(err)
	if e == nil || e.Code != agent.CodeAgentCrashed || !strings.Contains(e.Message, "exit status 3") {
		t.Fatalf("Turn error %v", err)
	}
}

func TestFakeOverlongServerRequestIsAnswered(t *testing.T) {
	l := fakeLaunch(t, "longline")
	l.MaxLine = 1024
	s, err := Start(context.Background(), l)
	if err != nil {
		t.Fatal(err)
	}
	defer closeNow(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h := &recorder{decide: func(policy.Call) policy.Verdict { t.Error("the gate saw an unread request"); return policy.Verdict{} }}
	res, err := s.Turn(ctx, "hi", h)
	if err != nil || res.Outcome != agent.TurnCompleted {
		t.Fatalf("Turn = %+v, %v", res, err)
	}
}

func TestFakeCloseKillsStubbornProcess(t *testing.T) {
	// Ignores both its stdin closing and SIGTERM: Close must get to SIGKILL.
	dir := t.TempDir()
	script := dir + "/stubborn"
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntrap '' TERM\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	l := agent.Launch{Executable: script, WorkFolder: dir, Env: []string{"PATH=/usr/bin:/bin"}}
	s, err := spawn(l)
	if err != nil {
		t.Fatal(err)
	}
	s.StdinGrace, s.KillGrace = 50*time.Millisecond, 50*time.Millisecond
	start := time.Now()
	closeNow(t, s)
	select {
	case <-s.p.Done():
	default:
		t.Fatal("Close returned before the process was gone")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Close took %v", d)
	}
}

// An agent that stops reading its stdin leaves a large message stuck in the
// pipe; Close must still end the process, and the write must fail.
func TestFakeCloseWhileAWriteIsStuck(t *testing.T) {
	dir := t.TempDir()
	deaf := dir + "/deaf"
	if err := os.WriteFile(deaf, []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var log agenttest.LogBuffer
	writing := log.Signal(agent.StreamStdin)
	s, err := spawn(agent.Launch{Executable: deaf, WorkFolder: dir, Env: []string{"PATH=/usr/bin:/bin"}, Log: log.Log()})
	if err != nil {
		t.Fatal(err)
	}
	s.StdinGrace, s.KillGrace = 50*time.Millisecond, 50*time.Millisecond
	wrote := make(chan error, 1)
	go func() {
		wrote <- s.rpc.Notify("turn/start", strings.Repeat("x", 8<<20))
	}()
	<-writing // far more than a pipe holds: the write blocks
	closed := make(chan error, 1)
	go func() { closed <- s.Close(context.Background()) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close is stuck behind the blocked write")
	}
	select {
	case err := <-wrote:
		if err == nil {
			t.Error("the stuck write reported success")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the write is still stuck after Close")
	}
}
