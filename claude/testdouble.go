package claude

// test_double: blobhub-worker's scripted agent type, for a consumer's
// end-to-end tests that cannot install a real agent. A JSON file named by
// TEST_DOUBLE_SCRIPT says what each turn does; its tool calls speak Claude
// Code's tool names and go through the gate as Claude Code's do (that is
// why it lives beside Claude Code's tool table). The script is played
// through a real process (cat, which sends back each line it is given), so
// the turn has a process group, output lines and a close like any agent's.
// docs/agents.md, "test_double".

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/proc"
	"github.com/blobhub/bhw-run/policy"
)

// TestDoubleScriptEnv names the script file (blobhub-worker's variable).
const TestDoubleScriptEnv = "TEST_DOUBLE_SCRIPT"

// maxScript bounds the script file read each turn.
const maxScript = 4 << 20

// TestDouble is the test_double adapter.
var TestDouble = agent.Adapter{
	Type:          "test_double",
	Executable:    "cat",
	EnvPrefixes:   []string{"TEST_DOUBLE_"},
	HostSessionID: true,
	Describe:      describe,
	Start:         agent.StartFunc(startDouble),
}

// doubleSession plays the script through its cat.
type doubleSession struct {
	proc.Session
	l      agent.Launch
	script string
}

func startDouble(_ context.Context, l agent.Launch) (*doubleSession, error) {
	s := &doubleSession{l: l}
	for _, kv := range l.Env {
		if v, ok := strings.CutPrefix(kv, TestDoubleScriptEnv+"="); ok {
			s.script = v
		}
	}
	id := l.SessionID
	if id == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		id = "td_" + hex.EncodeToString(b[:])
	}
	s.SetSessionID(id)
	p, err := proc.Start(proc.Config{Path: l.Executable, Dir: l.WorkFolder, Env: l.Env,
		Log: l.Log, MaxLine: l.MaxLine, KillGrace: l.KillGrace, Confine: l.Confine})
	if err != nil {
		return nil, agent.Errorf(agent.CodeAgentSpawnFailed, "test_double: start %s: %v", l.Executable, err)
	}
	s.Proc = p
	return s, nil
}

// doubleScript is the script file: turns, the first whose match is in the
// turn's message (or that has none) played.
type doubleScript struct {
	Turns []doubleTurn `json:"turns"`
}

type doubleTurn struct {
	Match      *string           `json:"match"`
	Thinking   string            `json:"thinking"`
	Tools      []doubleTool      `json:"tools"`
	Text       string            `json:"text"`
	Status     string            `json:"status"`
	DurationMS int64             `json:"duration_ms"`
	Error      string            `json:"error"`
	Usage      map[string]int64  `json:"usage"`
	Files      map[string]string `json:"files"`
	Prompt     *doublePrompt     `json:"prompt"`
	Harness    string            `json:"harness"`
}

type doubleTool struct {
	ID     string          `json:"id"`
	Name   string          `json:"name"`
	Input  json.RawMessage `json:"input"`
	Output string          `json:"output"`
}

type doublePrompt struct {
	Kind      string            `json:"kind"`
	Questions []policy.Question `json:"questions"`
}

// loadTurn reads the script and picks the turn for message.
func (s *doubleSession) loadTurn(message string) (*doubleTurn, error) {
	if s.script == "" {
		return nil, fmt.Errorf("%s is not set; give the agent the script's path in its environment (agents.test_double.env)", TestDoubleScriptEnv)
	}
	b, err := readScript(s.script)
	if err != nil {
		return nil, fmt.Errorf("%s=%s could not be read: %v", TestDoubleScriptEnv, s.script, err)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	var sc doubleScript
	if err := dec.Decode(&sc); err != nil {
		return nil, fmt.Errorf("%s=%s is not a script {\"turns\": [...]}: %v", TestDoubleScriptEnv, s.script, err)
	}
	for i := range sc.Turns {
		t := &sc.Turns[i]
		if t.Match == nil || strings.Contains(message, *t.Match) {
			return t, t.check()
		}
	}
	return nil, fmt.Errorf("%s=%s has %d turns and none matched this turn's message, which begins %.200q", TestDoubleScriptEnv, s.script, len(sc.Turns), message)
}

// check refuses what the worker refuses of a turn.
func (t *doubleTurn) check() error {
	if t.Status == "" {
		t.Status = "completed"
	}
	if !slices.Contains([]string{"completed", "failed", "aborted", "timeout", "cancelled"}, t.Status) {
		return fmt.Errorf("status %q: use completed, failed, aborted, timeout or cancelled", t.Status)
	}
	if t.Harness != "" && t.Harness != Adapter.Type {
		return fmt.Errorf("harness %q: bhw-run's test_double speaks only claude_code's tool names", t.Harness)
	}
	for k := range t.Usage {
		if !slices.Contains([]string{"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"}, k) {
			return fmt.Errorf("usage key %q: use input_tokens, output_tokens, cache_read_tokens or cache_write_tokens", k)
		}
	}
	for rel := range t.Files {
		if rel == "" || filepath.IsAbs(rel) || slices.Contains(strings.Split(filepath.ToSlash(rel), "/"), "..") {
			return fmt.Errorf("files: %q must be a path relative to the work folder that does not leave it", rel)
		}
	}
	if t.Prompt != nil && len(t.Prompt.Questions) == 0 {
		return errors.New("prompt.questions must hold at least one question")
	}
	return nil
}

// echo sends v through the cat and waits for it to come back: the turn's
// output is the process's.
func (s *doubleSession) echo(ctx context.Context, v any) error {
	b, _ := json.Marshal(v)
	if err := s.Proc.WriteLine(b); err != nil {
		return agent.Errorf(agent.CodeAgentCrashed, "test_double: %v", err)
	}
	select {
	case _, ok := <-s.Proc.Lines():
		if !ok {
			return agent.Errorf(agent.CodeAgentCrashed, "test_double: its process ended (%s)", s.Proc.ExitStatus(0))
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Turn plays one turn of the script: its files are written, then its
// thinking, each tool call through the gate, its text, its question.
func (s *doubleSession) Turn(ctx context.Context, message string, h agent.Handler) (agent.TurnResult, error) {
	start := time.Now()
	t, err := s.loadTurn(message)
	if err != nil {
		// As the worker: a script that cannot be played fails the thread.
		return agent.TurnResult{}, agent.Errorf(agent.CodeAgentCrashed, "test_double: %v", err)
	}
	if err := s.writeFiles(t.Files); err != nil {
		return agent.TurnResult{}, agent.Errorf(agent.CodeAgentCrashed, "test_double: %v", err)
	}
	step := func(it agent.Item) error {
		if err := s.echo(ctx, it.Meta); err != nil {
			return err
		}
		h.Emit(it)
		return nil
	}
	if t.Thinking != "" {
		if err := step(agent.ThinkingItem(t.Thinking)); err != nil {
			return agent.TurnResult{Outcome: agent.TurnInterrupted}, err
		}
	}
	for i, tool := range t.Tools {
		id := cmp.Or(tool.ID, fmt.Sprintf("scripted-%d", i+1))
		in := tool.Input
		if len(in) == 0 {
			in = json.RawMessage("{}")
		}
		name := cmp.Or(tool.Name, "tool")
		c := policy.Call{Tool: name, Effect: toolEffect(name), InvocationID: id, Input: in,
			Target: toolTarget(name, in), Fingerprint: Fingerprint(name, in), Kind: policy.KindApproval}
		c.Summary = policy.Summary(name, c.Target)
		if err := step(agent.ToolCallItem(name, id, in, strings.TrimPrefix(c.Summary, name+" → "))); err != nil {
			return agent.TurnResult{Outcome: agent.TurnInterrupted}, err
		}
		switch v := h.Decide(c); v.Action {
		case policy.Allow:
			err = step(agent.ToolResultItem(id, tool.Output, false))
		case policy.Park:
			h.Emit(agent.ParkedResultItem(id))
			return s.result(t, agent.TurnParked, start), nil
		default:
			err = step(agent.ToolResultItem(id, "Denied: "+cmp.Or(v.Message, "refused by bhw-run's gate"), true))
		}
		if err != nil {
			return agent.TurnResult{Outcome: agent.TurnInterrupted}, err
		}
	}
	// The text comes before the question, as the worker plays them: what
	// the agent said is on the thread when it waits for the answer.
	if t.Text != "" {
		if err := step(agent.TextItem(t.Text)); err != nil {
			return agent.TurnResult{Outcome: agent.TurnInterrupted}, err
		}
	}
	if t.Prompt != nil {
		c := policy.Call{Tool: "AskUserQuestion", InvocationID: "scripted-question", Kind: policy.KindAskUserQuestion,
			Questions: t.Prompt.Questions, Input: json.RawMessage("{}")}
		if t.Prompt.Kind == policy.KindApproval {
			c.Kind = policy.KindApproval
		}
		if v := h.Decide(c); v.Action == policy.Park {
			return s.result(t, agent.TurnParked, start), nil
		}
	}
	outcome := agent.TurnCompleted
	if t.Status != "completed" {
		outcome = agent.TurnFailed
	}
	return s.result(t, outcome, start), nil
}

// result is the turn's end: its usage and duration as scripted.
func (s *doubleSession) result(t *doubleTurn, outcome string, start time.Time) agent.TurnResult {
	r := agent.TurnResult{Outcome: outcome, NumTurns: 1, DurationMS: t.DurationMS}
	if r.DurationMS == 0 {
		r.DurationMS = time.Since(start).Milliseconds()
	}
	r.Usage.InputTokens = t.Usage["input_tokens"] + t.Usage["cache_read_tokens"] + t.Usage["cache_write_tokens"]
	r.Usage.InputTokensCached = t.Usage["cache_read_tokens"]
	r.Usage.OutputTokens = t.Usage["output_tokens"]
	if outcome == agent.TurnFailed {
		r.ErrorText = cmp.Or(t.Error, "the script ended the turn "+t.Status)
	}
	return r
}

// writeFiles writes the turn's files inside the work folder, through a
// root that no link can leave.
func (s *doubleSession) writeFiles(files map[string]string) error {
	if len(files) == 0 {
		return nil
	}
	root, err := os.OpenRoot(s.l.WorkFolder)
	if err != nil {
		return err
	}
	defer root.Close()
	for rel, body := range files {
		if dir := filepath.Dir(rel); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("files: %s: %v", rel, err)
			}
		}
		if err := root.WriteFile(rel, []byte(body), 0o644); err != nil {
			return fmt.Errorf("files: %s: %v", rel, err)
		}
	}
	return nil
}

// Interrupt stops the turn at its next step: the cat is closed.
func (s *doubleSession) Interrupt() error {
	s.Proc.CloseStdin()
	return nil
}

// Close ends the cat.
func (s *doubleSession) Close(ctx context.Context) error { return s.Proc.Close(ctx) }

// readScript reads the script file, at most maxScript bytes.
func readScript(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxScript+1))
	if err == nil && len(b) > maxScript {
		err = fmt.Errorf("larger than %d bytes", maxScript)
	}
	return b, err
}
