// Package claude drives the Claude Code CLI (2.1.332, pinned) for one
// activation: it launches the native binary with stream-json on stdin and
// stdout, relays each turn as thread items, routes every permission request
// through the gate and stops the process group cleanly. It exports Adapter,
// the descriptor run knows it by. The CLI's behaviour it relies on is in
// docs/agents.md.
package claude

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/jsonrpc"
	"github.com/blobhub/bhw-run/agent/proc"
)

// Default graces of a cancelled Turn and of Close.
const (
	DefaultTurnGrace = 3 * time.Second // after an interrupt on ctx cancel, for the result
)

// Session is one live claude process. Its exported grace fields may be
// shortened (tests) before the first Turn or Close.
type Session struct {
	ExitWait  time.Duration // Close: after closing stdin, before SIGTERM
	KillGrace time.Duration // Close: after SIGTERM, before SIGKILL
	TurnGrace time.Duration

	l      agent.Launch
	logger *slog.Logger
	// The process, and the Claude session id: the one given to
	// --session-id or --resume, confirmed by system/init.
	proc.Session

	wmu    sync.Mutex // numbers control requests
	reqSeq int

	// instructions is the folder of the private copy of CLAUDE.md the CLI
	// was given ("" for none); Close removes it.
	instructions string

	mu          sync.Mutex
	sawInit     bool
	interrupted bool
	tools       []string
	// images go with the next Turn's message (AttachImages).
	images []agent.Image
}

// Start launches the agent and returns once the process is spawned. The
// CLI prints system/init only after the first user message, so Start does
// not wait for it. Launch failures are *agent.Error AGENT_SPAWN_FAILED.
func Start(ctx context.Context, l agent.Launch) (*Session, error) {
	s := &Session{TurnGrace: DefaultTurnGrace, l: l, logger: l.Logger}
	s.SetSessionID(l.SessionID)
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	md, err := s.copyInstructions()
	if err != nil {
		return nil, err
	}
	args, env, err := command(l, md)
	if err == nil {
		s.Proc, err = proc.Start(proc.Config{Path: l.Executable, Args: args, Dir: l.WorkFolder, Env: env,
			Log: l.Log, MaxLine: l.MaxLine, KillGrace: l.KillGrace, Confine: l.Confine})
		if err != nil {
			err = agent.Errorf(agent.CodeAgentSpawnFailed, "claude: start %s: %v", l.Executable, err)
		}
	}
	if err != nil {
		s.removeInstructions()
		return nil, err
	}
	s.ExitWait, s.KillGrace = s.Proc.StdinGrace, s.Proc.KillGrace
	s.logger.Debug("claude started", "pid", s.Proc.Pid(), "session_id", l.SessionID, "resume", l.Resume)
	return s, nil
}

// copyInstructions writes Launch.Instructions, the CLAUDE.md run read and
// checked, to a private file for --append-system-prompt-file, so the CLI
// reads exactly those bytes: given the work folder's path it would open it
// again later, when it may be a link to anything. It lives as long as the
// session (Close removes it). It returns the file's path, "" for none.
func (s *Session) copyInstructions() (string, error) {
	if s.l.Instructions == nil || s.l.Permissions == "autonomous" {
		return "", nil
	}
	// A confined agent's copy lives in its private temp folder (its
	// TMPDIR), which no other agent may read; an unconfined one's in
	// bhw-run's TMPDIR, which the confinement denies to every agent.
	parent := ""
	if s.l.Confine != nil {
		parent = agent.EnvValue(s.l.Env, "TMPDIR")
	}
	dir, err := os.MkdirTemp(parent, "bhw-claude-md-")
	if err == nil {
		s.instructions = dir
		err = os.WriteFile(filepath.Join(dir, "CLAUDE.md"), s.l.Instructions, 0o600)
	}
	if err != nil {
		s.removeInstructions()
		return "", agent.Errorf(agent.CodeAgentSpawnFailed, "claude: cannot copy CLAUDE.md for the agent: %v; check TMPDIR", err)
	}
	return filepath.Join(dir, "CLAUDE.md"), nil
}

func (s *Session) removeInstructions() {
	if s.instructions != "" {
		_ = os.RemoveAll(s.instructions)
		s.instructions = ""
	}
}

// command builds argv and env (docs/agents.md, Claude Code launch),
// refusing unsafe values before anything is spawned. md is the private
// copy of CLAUDE.md to append to the system prompt ("" for none).
func command(l agent.Launch, md string) (args, env []string, err error) {
	if l.Executable == "" {
		return nil, nil, agent.Errorf(agent.CodeAgentSpawnFailed, "claude: no executable given")
	}
	args = []string{"-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
		"--permission-prompt-tool", "stdio", "--strict-mcp-config"}
	flag := func(name, value string) error {
		if err := checkValue(name, value); err != nil {
			return err
		}
		args = append(args, "--"+name+"="+value)
		return nil
	}
	if l.SessionID == "" {
		return nil, nil, agent.Errorf(agent.CodeAgentSpawnFailed, "claude: no session id given")
	}
	name := "session-id"
	if l.Resume {
		name = "resume"
	}
	if err := flag(name, l.SessionID); err != nil {
		return nil, nil, err
	}
	if l.Model != "" {
		if err := flag("model", l.Model); err != nil {
			return nil, nil, err
		}
	}
	if l.Effort != "" {
		if err := flag("effort", l.Effort); err != nil {
			return nil, nil, err
		}
	}
	env = append([]string(nil), l.Env...)
	switch l.Permissions {
	case "autonomous":
		args = append(args, "--permission-mode=bypassPermissions")
		// As root the CLI refuses bypass without it (anthropics/claude-code#3490).
		env = append(env, "IS_SANDBOX=1")
	case "approval", "guarded":
		// No settings file, hook or .mcp.json may approve a call before the
		// gate sees it: with the stock launch the user and local settings,
		// hooks and .mcp.json servers all can (measured on 2.1.332).
		// CLAUDE.md is passed explicitly below (run's checked copy) because
		// this drops it too.
		args = append(args, "--permission-mode=default", "--setting-sources=")
	default:
		return nil, nil, agent.Errorf(agent.CodeAgentSpawnFailed, "claude: unknown permissions %q; want autonomous, guarded or approval", l.Permissions)
	}
	// What remains of the thread's budget: the CLI stops the turn itself
	// (result error_max_turns, error_max_budget_usd). --max-budget-usd
	// counts this process's cost only, not the resumed session's.
	if l.Budget.MaxTurns > 0 {
		args = append(args, fmt.Sprintf("--max-turns=%d", l.Budget.MaxTurns))
	}
	if l.Budget.MaxCostUSD > 0 {
		args = append(args, "--max-budget-usd="+strconv.FormatFloat(l.Budget.MaxCostUSD, 'f', -1, 64))
	}
	if md != "" && l.Permissions != "autonomous" {
		if err := flag("append-system-prompt-file", md); err != nil {
			return nil, nil, err
		}
	}
	for _, a := range l.ExtraArgs {
		if hasControl(a) {
			return nil, nil, agent.Errorf(agent.CodeAgentSpawnFailed, "claude: extra argument %q holds a control character; remove it", a)
		}
	}
	args = append(args, l.ExtraArgs...)
	return args, env, nil
}

func checkValue(name, v string) error {
	if strings.HasPrefix(v, "-") {
		return agent.Errorf(agent.CodeAgentSpawnFailed, "claude: --%s value %q starts with '-'; fix the thread's agent settings", name, v)
	}
	if hasControl(v) {
		return agent.Errorf(agent.CodeAgentSpawnFailed, "claude: --%s value %q holds a control character; fix the thread's agent settings", name, v)
	}
	return nil
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return true
		}
	}
	return false
}

// Tools is system/init.tools of the last init seen.
func (s *Session) Tools() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.tools...)
}

// Interrupt asks the CLI to stop the running turn; the turn then ends with
// result error_during_execution (outcome interrupted). A CLI that does not
// take it within the process's interrupt bound is stopped
// (proc.Interrupting). Safe from any goroutine.
func (s *Session) Interrupt() error {
	s.Proc.Interrupting()
	s.mu.Lock()
	s.interrupted = true
	s.mu.Unlock()
	s.wmu.Lock()
	s.reqSeq++
	id := fmt.Sprintf("bhw_req_%d", s.reqSeq)
	s.wmu.Unlock()
	return s.writeJSON(map[string]any{"type": "control_request", "request_id": id,
		"request": map[string]any{"subtype": "interrupt"}})
}

// Close ends the process: close stdin and wait ExitWait, then SIGTERM to the
// group, SIGKILL to the group after KillGrace. It returns once the process
// has exited. A ctx that ends cuts the waits short (each step escalates at
// once); pass a fresh cleanup context, not the cancelled run context.
func (s *Session) Close(ctx context.Context) error {
	s.Proc.SetGraces(s.ExitWait, s.KillGrace)
	err := s.Proc.Close(ctx)
	s.removeInstructions()
	return err
}

func (s *Session) writeJSON(v any) error {
	b, err := jsonrpc.Marshal(v)
	if err != nil {
		return err
	}
	return s.Proc.WriteLine(b)
}

func (s *Session) logf(format string, args ...any) { s.Proc.Logf(format, args...) }

// stderrTail is the last non-empty stderr line, and whether there was one.
func (s *Session) stderrTail() (string, bool) {
	tail := s.Proc.Stderr()
	if len(tail) == 0 {
		return "", false
	}
	return tail[len(tail)-1], true
}
