package codex

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/agent/jsonrpc"
	"github.com/blobhub/bhw-run/policy"
)

// transcriptLines are the agent→host lines of a recorded transcript
// (testdata/codex, written by `go test -tags realcli ./codex -record` against the real CLI).
func transcriptLines(t testing.TB, name string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(agenttest.ModuleRoot(t), "testdata/codex", name))
	if err != nil {
		t.Fatalf("%v (re-record with `go test -tags realcli ./codex -record`)", err)
	}
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("codex< ")); ok {
			out = append(out, append([]byte(nil), rest...))
		}
	}
	return out
}

func TestDecodeTranscripts(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(agenttest.ModuleRoot(t), "testdata/codex/*.log"))
	if len(files) == 0 {
		t.Fatal("no transcripts in testdata/codex")
	}
	kinds := map[jsonrpc.Kind]int{}
	for _, f := range files {
		for _, line := range transcriptLines(t, filepath.Base(f)) {
			m, err := jsonrpc.Decode(line)
			if err != nil {
				t.Errorf("%s: %v: %s", filepath.Base(f), err, firstBytes(line, 200))
				continue
			}
			kinds[m.Kind]++
			if m.Kind == jsonrpc.Request {
				if _, _, ok := jsonrpc.RequestInHead(line[:min(len(line), 4096)]); !ok {
					t.Errorf("prefix of a server request not recognised: %s", firstBytes(line, 200))
				}
			}
		}
	}
	if kinds[jsonrpc.Request] == 0 || kinds[jsonrpc.Response] == 0 || kinds[jsonrpc.Notification] == 0 {
		t.Errorf("kinds seen %v", kinds)
	}
}

// replay feeds a recorded turn through the turn mapping, the gate answering
// with verdict. Answers to the agent go to /dev/null.
func replay(t *testing.T, name string, verdict policy.Action) (*turn, *recorder) {
	t.Helper()
	s := testSession(io.Discard)
	h := &recorder{Gate: func(policy.Call) policy.Verdict { return policy.Verdict{Action: verdict} }}
	tr := &turn{s: s, h: h, calls: map[string]bool{}, results: map[string]bool{}, changes: map[string]json.RawMessage{}, startKnown: true}
	inTurn := false
	for _, line := range transcriptLines(t, name) {
		m, err := jsonrpc.Decode(line)
		if err != nil {
			t.Fatal(err)
		}
		if m.Kind == jsonrpc.Response {
			var r turnResult
			if json.Unmarshal(m.Result, &r) == nil && r.Turn.ID != "" {
				inTurn = true
			}
			continue
		}
		if !inTurn {
			continue
		}
		tr.handle(m)
		if tr.completed != nil {
			break
		}
	}
	if tr.completed == nil {
		t.Fatalf("%s: no turn/completed", name)
	}
	return tr, h
}

func TestReplayTranscripts(t *testing.T) {
	cases := []struct {
		file    string
		verdict policy.Action
		status  string
		items   string
	}{
		{"TestAutonomousCommandPatchAndResume-0.log", policy.Deny, "completed", "tool_call,tool_result,tool_call,tool_result,text"},
		{"TestAutonomousCommandPatchAndResume-1.log", policy.Deny, "completed", "text"},
		{"TestApprovalEscalationParkThenGrant-0.log", policy.Park, "interrupted", "tool_call,tool_result"},
		{"TestApprovalEscalationParkThenGrant-1.log", policy.Allow, "completed", "tool_call,tool_result,text"},
		{"TestApprovalDenyDeclines-0.log", policy.Deny, "completed", "tool_call,tool_result,text"},
		{"TestReadOnlyFileChangeParkThenGrant-0.log", policy.Park, "interrupted", "tool_call,tool_result"},
		{"TestReadOnlyFileChangeParkThenGrant-1.log", policy.Allow, "completed", "tool_call,tool_result,text"},
		{"TestHTTP500FailsTurn-0.log", policy.Deny, "failed", "status"},
		{"TestInterruptSleepingCommandThenClose-0.log", policy.Deny, "interrupted", "tool_call"},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			tr, h := replay(t, c.file, c.verdict)
			if tr.completed.Status != c.status {
				t.Errorf("status %q, want %q", tr.completed.Status, c.status)
			}
			if got := strings.Join(h.Types(), ","); got != c.items {
				t.Errorf("items %s, want %s", got, c.items)
			}
			if c.verdict == policy.Park && !tr.parked {
				t.Error("not parked")
			}
		})
	}
}

func TestCommandCallFingerprintIgnoresIDs(t *testing.T) {
	tr := &turn{cwd: "/w"}
	mk := func(item, reason string) policy.Call {
		cmd, cwd := "/bin/bash -lc 'touch x && echo ok'", "/w"
		return tr.commandCall(commandApprovalParams{ItemID: item, TurnID: item, Command: &cmd, Cwd: &cwd, Reason: &reason})
	}
	a, b := mk("call_1", "why"), mk("call_2", "other words")
	if a.Fingerprint != b.Fingerprint || a.Fingerprint == "" {
		t.Errorf("fingerprints differ: %s %s", a.Fingerprint, b.Fingerprint)
	}
	if a.Target.Command != "touch x && echo ok" || a.Summary != "exec_command → touch x && echo ok" {
		t.Errorf("target %+v summary %q", a.Target, a.Summary)
	}
}

func TestFileChangeCallGrantRoot(t *testing.T) {
	changes := json.RawMessage(`[{"path":"a.txt","kind":{"type":"add"},"diff":"x\n"}]`)
	tr := &turn{cwd: "/w", changes: map[string]json.RawMessage{"call_1": changes}}
	plain := tr.fileChangeCall(fileChangeApprovalParams{ItemID: "call_1"})
	root := "/"
	wide := tr.fileChangeCall(fileChangeApprovalParams{ItemID: "call_1", GrantRoot: &root})
	if plain.Fingerprint == "" || plain.Fingerprint == wide.Fingerprint {
		t.Errorf("a grantRoot must change the fingerprint: %s %s", plain.Fingerprint, wide.Fingerprint)
	}
	if len(plain.Target.Paths) != 1 || plain.Target.Paths[0] != "/w/a.txt" {
		t.Errorf("paths %v", plain.Target.Paths)
	}
	if wide.GrantRoot != "/" || !strings.Contains(wide.Summary, "/") {
		t.Errorf("grant root not shown: %+v", wide)
	}
	unknown := tr.fileChangeCall(fileChangeApprovalParams{ItemID: "call_9"})
	if unknown.Fingerprint != "" {
		t.Errorf("unknown changes fingerprinted %s", unknown.Fingerprint)
	}
}

func FuzzDecodeLine(f *testing.F) {
	files, _ := filepath.Glob("../testdata/codex/*.log")
	for _, file := range files {
		b, _ := os.ReadFile(file)
		for _, l := range bytes.Split(b, []byte("\n")) {
			if rest, ok := bytes.CutPrefix(l, []byte("codex< ")); ok {
				f.Add(rest)
			}
		}
	}
	f.Add([]byte(`{"id":1}`))
	f.Add([]byte(`{"id":"x","method":"m"}`))
	f.Add([]byte(`{"method":"item/completed","params":{"item":{"type":"fileChange","changes":7}}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, line []byte) {
		m, err := jsonrpc.Decode(line)
		jsonrpc.RequestInHead(line)
		if err != nil {
			return
		}
		var n itemNotification
		if json.Unmarshal(m.Params, &n) == nil {
			describeItem(n.Item)
			toolOutput(n.Item)
			reasoningText(n.Item)
			changePaths(n.Item.Changes, "/w")
		}
		var tn turnNotification
		_ = json.Unmarshal(m.Params, &tn)
	})
}

// Several approvals open at once (parallel tool calls): the first parks the
// turn, every other is cancelled without reaching the gate.
func TestParkCancelsOtherApprovals(t *testing.T) {
	var answers bytes.Buffer
	s := testSession(&answers)
	h := &recorder{Gate: func(policy.Call) policy.Verdict { return policy.Verdict{Action: policy.Park} }}
	tr := &turn{s: s, h: h, cwd: "/w", calls: map[string]bool{}, results: map[string]bool{}, changes: map[string]json.RawMessage{}}
	lines := []string{
		`{"method":"item/started","params":{"item":{"type":"commandExecution","id":"call_1","command":"/bin/bash -lc 'touch a'","cwd":"/w","status":"inProgress"}}}`,
		`{"method":"item/started","params":{"item":{"type":"fileChange","id":"call_2","changes":[{"path":"/w/b","kind":{"type":"add"},"diff":"b\n"}],"status":"inProgress"}}}`,
		`{"method":"item/commandExecution/requestApproval","id":0,"params":{"itemId":"call_1","threadId":"th","turnId":"t","command":"/bin/bash -lc 'touch a'","cwd":"/w"}}`,
		`{"method":"item/fileChange/requestApproval","id":1,"params":{"itemId":"call_2","threadId":"th","turnId":"t","grantRoot":null}}`,
		`{"method":"item/commandExecution/requestApproval","id":2,"params":{"itemId":"call_3","threadId":"th","turnId":"t","command":"/bin/bash -lc 'touch c'","cwd":"/w"}}`,
		`{"method":"item/completed","params":{"item":{"type":"commandExecution","id":"call_1","command":"/bin/bash -lc 'touch a'","cwd":"/w","status":"declined"}}}`,
		`{"method":"turn/completed","params":{"turn":{"id":"t","status":"interrupted"}}}`,
	}
	for _, l := range lines {
		m, err := jsonrpc.Decode([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		tr.handle(m)
	}
	want := `{"id":0,"result":{"decision":"cancel"}}` + "\n" + `{"id":1,"result":{"decision":"cancel"}}` + "\n" + `{"id":2,"result":{"decision":"cancel"}}` + "\n"
	if answers.String() != want {
		t.Errorf("answers:\n%s", answers.String())
	}
	if len(h.Calls()) != 1 || !tr.parked {
		t.Errorf("gate saw %d calls, parked %v", len(h.Calls()), tr.parked)
	}
	// Three calls, each closed once, calls before results: the parked one
	// waits for a person, the others did not run because of it; none is
	// an error.
	if got := strings.Join(h.Types(), ","); got != "tool_call,tool_call,tool_result,tool_result,tool_call,tool_result" {
		t.Errorf("items %s", got)
	}
	for i, it := range h.OfType("tool_result") {
		_, parked := agent.IsParkedResult(it)
		if parked != (i == 0) || toolMeta(it)["is_error"] != false ||
			i == 0 && toolMeta(it)["output"] != agent.WaitingText || i > 0 && toolMeta(it)["output"] != notRunText {
			t.Errorf("result %d %v", i, it.Meta)
		}
	}
}

// A grant for running a command must not cover a different request about
// the same command line: input to a running terminal (kind writeStdin), a
// network approval for some host, or a request that names no command.
func TestCommandCallFingerprintCoversOnlyThatCall(t *testing.T) {
	tr := &turn{cwd: "/w"}
	cmd, cwd := "/bin/bash -lc 'python3 -i'", "/w"
	plain := tr.commandCall(commandApprovalParams{ItemID: "call_1", Command: &cmd, Cwd: &cwd})
	explicit := "command"
	same := tr.commandCall(commandApprovalParams{ItemID: "call_2", Command: &cmd, Cwd: &cwd, Kind: &explicit})
	if plain.Fingerprint == "" || plain.Fingerprint != same.Fingerprint {
		t.Fatalf("kind command must not change the fingerprint: %s %s", plain.Fingerprint, same.Fingerprint)
	}
	stdin := "writeStdin"
	others := map[string]policy.Call{
		"writeStdin": tr.commandCall(commandApprovalParams{ItemID: "call_3", Command: &cmd, Cwd: &cwd, Kind: &stdin}),
		"network": tr.commandCall(commandApprovalParams{ItemID: "call_4", Command: &cmd, Cwd: &cwd,
			NetworkApprovalContext: json.RawMessage(`{"host":"evil.example","protocol":"https"}`)}),
	}
	for name, c := range others {
		if c.Fingerprint == plain.Fingerprint {
			t.Errorf("%s request shares the fingerprint of the plain command", name)
		}
	}
	for name, want := range map[string]string{"writeStdin": `"kind":"writeStdin"`, "network": "evil.example"} {
		if !strings.Contains(string(others[name].Input), want) {
			t.Errorf("%s request input %s does not show it", name, others[name].Input)
		}
	}
	a := tr.commandCall(commandApprovalParams{ItemID: "call_5", CommandActions: []commandAction{{Command: "ls"}}})
	b := tr.commandCall(commandApprovalParams{ItemID: "call_6", CommandActions: []commandAction{{Command: "rm -rf /"}}})
	if a.Fingerprint != "" || b.Fingerprint != "" {
		t.Errorf("requests without a command got fingerprints %q %q", a.Fingerprint, b.Fingerprint)
	}
}

// The recorded limits and refusals classify as they did live: the usage
// limit with the reset of the window it used up.
func TestReplayFailures(t *testing.T) {
	cases := []struct {
		file, want string
		reset      bool
	}{
		{"TestLimitsAndRefusedKey_UsageLimit-0.log", agent.FailureRateLimit, true},
		{"TestLimitsAndRefusedKey_RateLimited-0.log", agent.FailureRateLimit, false},
		{"TestLimitsAndRefusedKey_RefusedKey-0.log", agent.FailureAuth, false},
		{"TestLimitsAndRefusedKey_NoKeyVariable-0.log", agent.FailureAuth, false},
		{"TestHTTP500FailsTurn-0.log", "", false},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			tr, _ := replay(t, c.file, policy.Deny)
			r, err := tr.finish(context.Background())
			if err != nil || r.Failure != c.want || r.ResetAt.IsZero() == c.reset {
				t.Fatalf("result %+v, %v; want failure %q (reset %v)", r, err, c.want, c.reset)
			}
		})
	}
}

// TestDeltasSkippedUndecoded: readLoop skips the delta notifications
// without decoding them (isDelta) — and nothing else: not a request that
// happens to be named like one, not a line written another way. Over the
// recorded transcripts every line isDelta takes is a notification, and
// every agentMessage delta is taken.
func TestDeltasSkippedUndecoded(t *testing.T) {
	for _, c := range []struct {
		line string
		want bool
	}{
		{`{"method":"item/agentMessage/delta","params":{"delta":"hi"}}`, true},
		{`{"method":"item/commandExecution/outputDelta","params":{"delta":"aGk="}}`, true},
		{`{"method":"item/reasoning/summaryTextDelta","params":{}}`, true},
		{`{"method":"item/agentMessage/delta","id":7,"params":{}}`, false}, // a request: answered as any
		{`{"id":7,"method":"item/agentMessage/delta","params":{}}`, false},
		{`{ "method":"item/agentMessage/delta","params":{}}`, false}, // written otherwise: decoded
		{`{"method":"item/completed","params":{}}`, false},
		{`{"method":"item/agentMessage/deltas","params":{}}`, false},
		{`{"method":"item/agentMessage/delta"`, false},
		{``, false},
	} {
		if got := isDelta([]byte(c.line)); got != c.want {
			t.Errorf("isDelta(%s) = %v, want %v", c.line, got, c.want)
		}
	}
	files, err := filepath.Glob(filepath.Join(agenttest.ModuleRoot(t), "testdata/codex", "*.log"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts (%v)", err)
	}
	deltas := 0
	for _, f := range files {
		for _, line := range transcriptLines(t, filepath.Base(f)) {
			m, err := jsonrpc.Decode(line)
			if err != nil {
				continue
			}
			skipped := isDelta(line)
			if skipped && m.Kind != jsonrpc.Notification {
				t.Errorf("%s: isDelta took a %v: %s", filepath.Base(f), m.Kind, line)
			}
			if m.Kind == jsonrpc.Notification && m.Method == "item/agentMessage/delta" {
				deltas++
				if !skipped {
					t.Errorf("%s: a delta not taken: %s", filepath.Base(f), line)
				}
			}
		}
	}
	if deltas == 0 {
		t.Fatal("the transcripts hold no agentMessage delta to check against")
	}
}
