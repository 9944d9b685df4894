// Package antigravity drives Google's Antigravity CLI, agy, headless, as
// blobhub-worker 0.11.0 drives it: one agy process per turn, the message on
// its command line, an NDJSON stream on stdout, and the gate in a
// PreToolUse hook that agy runs before every call. It is a room of its own
// because agy shares no protocol with another adapter: not Claude's
// stream-json (nothing goes in on stdin, and calls are not asked on the
// stream), not JSON-RPC (so not ACP, which agy has no mode for). It exports
// Adapter, the descriptor run knows it by, and Hook, the hook's program,
// which bhw-run runs as its hidden subcommand HookArg. docs/agents.md says
// what of agy it relies on.
package antigravity

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/proc"
	"github.com/blobhub/bhw-run/policy"
)

// Type is the agent type.
const Type = "antigravity"

// Adapter describes agy to run.
var Adapter = agent.Adapter{
	Type:        Type,
	Executable:  "agy",
	EnvPrefixes: []string{"ANTIGRAVITY_", "GEMINI_", "GOOGLE_"},
	HomeDirs:    []string{".gemini/antigravity", ".antigravity"},
	Describe:    describe,
	Login:       login,
	LoginCheck:  loginCheck,
	Start:       agent.StartFunc(Start),
}

func login(string) string {
	return "sign agy in as the user bhw-run runs as: run `agy` once and sign in, or set GEMINI_API_KEY under agents.antigravity.env in config.yaml"
}

// loginCheck: a key in its environment; agy's own sign-in cannot be told
// from outside, so without a key it is not checked.
func loginCheck(l agent.Launch) (bool, string) {
	if k := agent.KeyIn(l.Env, "GEMINI_API_KEY", "GOOGLE_API_KEY"); k != "" {
		return true, k + " is set in its environment"
	}
	return true, "not checked: agy keeps its sign-in in its own store, which bhw-run does not read; no GEMINI_API_KEY or GOOGLE_API_KEY in its environment"
}

// PrintTimeout is passed to --print-timeout: agy's own default (5m) ends
// real turns, and stopping a turn is run's job (--max-duration).
const PrintTimeout = "168h"

// blocked are the flags extra_args may not carry, as blobhub-worker
// blocks them: each is the adapter's to set. withValue: the flag takes a
// value, dropped with it.
var blocked = map[string]bool{
	"-p": true, "--print": true, "--prompt": true, "--dangerously-skip-permissions": false, "-c": false, "--continue": false,
	"--output-format": true, "--input-format": true, "--conversation": true, "--add-dir": true, "--print-timeout": true,
	"--model": true, "--effort": true,
}

// filterBlocked drops the blocked flags from args: "--flag=value" as one
// word, "--flag value" as two (the value only when there is one).
func filterBlocked(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		flag, _, hasValue := strings.Cut(args[i], "=")
		withValue, ok := blocked[flag]
		switch {
		case !ok:
			out = append(out, args[i])
		case withValue && !hasValue && i+1 < len(args):
			i++
		}
	}
	return out
}

// command is agy's argv after the message (agy -p <message> comes first),
// as blobhub-worker builds it: stream-json, the long print timeout, the
// permission layer skipped (it cannot ask anyone headless; the hook is the
// gate), the work folder as the workspace, --model or else --effort (agy
// refuses both: model wins), --conversation to resume, and the extra
// arguments without the blocked flags.
func command(l agent.Launch) ([]string, error) {
	if l.Executable == "" {
		return nil, agent.Errorf(agent.CodeAgentSpawnFailed, "antigravity: no executable given")
	}
	switch l.Permissions {
	case policy.PostureAutonomous, policy.PostureGuarded, policy.PostureApproval:
	default:
		return nil, agent.Errorf(agent.CodeAgentSpawnFailed, "antigravity: unknown permissions %q; want autonomous, guarded or approval", l.Permissions)
	}
	args := []string{"--output-format", "stream-json", "--print-timeout", PrintTimeout, "--dangerously-skip-permissions"}
	value := func(flag, v string) error {
		if strings.HasPrefix(v, "-") || hasControl(v) {
			return agent.Errorf(agent.CodeAgentSpawnFailed, "antigravity: %s value %q starts with '-' or holds a control character; fix the thread's agent settings", flag, v)
		}
		args = append(args, flag, v)
		return nil
	}
	if l.WorkFolder != "" {
		if err := value("--add-dir", l.WorkFolder); err != nil {
			return nil, err
		}
	}
	var err error
	switch {
	case l.Model != "":
		err = value("--model", l.Model)
	case l.Effort != "":
		err = value("--effort", l.Effort)
	}
	if err == nil && l.Resume && l.SessionID != "" {
		err = value("--conversation", l.SessionID)
	}
	if err != nil {
		return nil, err
	}
	for _, a := range l.ExtraArgs {
		if hasControl(a) {
			return nil, agent.Errorf(agent.CodeAgentSpawnFailed, "antigravity: extra argument %q holds a control character; remove it", a)
		}
	}
	return append(args, filterBlocked(l.ExtraArgs)...), nil
}

func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) })
}

// gated says the posture puts calls to the gate: the hook goes in.
func gated(permissions string) bool { return permissions != policy.PostureAutonomous }

// holder is the program the process group starts with: a shell that reads
// the turn's message from stdin (its length in bytes on a line, then the
// message) and then becomes agy with the message as -p's value and stdin
// at its end. So the group, recorded before the message goes out, is
// agy's; a run killed before it wrote the whole message leaves a shell that
// reads short and exits, never an agy with half a message.
const holder = `IFS= read -r n || exit 0
p=$(head -c "$n"; printf x) || exit 1
p=${p%x}
c=$(printf %s "$p" | wc -c)
[ $c -eq "$n" ] || exit 0
exec "$0" -p "$p" "$@" </dev/null`

// maxMessage is the longest message agy can take: one argument of the
// command line (Linux's MAX_ARG_STRLEN, less its NUL).
const maxMessage = 128<<10 - 1

// Default waits.
const (
	DefaultTurnGrace = 3 * time.Second        // after an interrupt, for the result
	matchWait        = 500 * time.Millisecond // a hook call's wait for its ACTIVE step
)

// Session is one activation of agy: its process group (started at Start,
// agy once Turn gives it the message), the hook's bridge and the hold on
// the work folder's hooks.json.
type Session struct {
	TurnGrace, ExitWait, KillGrace time.Duration

	l      agent.Launch
	logger *slog.Logger
	proc.Session

	bridge *bridge
	hold   *hold

	mu          sync.Mutex
	turned      bool
	interrupted bool
	closeOnce   sync.Once
	closeErr    error
}

// hookRecords is the state tree's folder of the work folders' hook records:
// beside the cache folder (the state tree's root), where a confined agent
// cannot reach; the user's cache folder without one (tests, doctor).
func hookRecords(l agent.Launch) string {
	if l.CacheDir != "" {
		return filepath.Join(filepath.Dir(l.CacheDir), "agy-hooks")
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "bhw-run", "agy-hooks")
}

// Start makes the work folder's hook ready (gated postures), starts the
// bridge and the process group that becomes agy. A hooks.json bhw-run will
// not merge into is AGENT_SPAWN_FAILED saying which file.
func Start(ctx context.Context, l agent.Launch) (*Session, error) {
	s := &Session{TurnGrace: DefaultTurnGrace, l: l, logger: l.Logger}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if l.Resume {
		s.SetSessionID(l.SessionID)
	}
	args, err := command(l)
	if err != nil {
		return nil, err
	}
	// The shell that becomes agy would only find a missing agy at the
	// turn: it is found here, as every agent's start finds it.
	if fi, err := os.Stat(l.Executable); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		why := "is not an executable file"
		if err != nil {
			why = err.Error()
		}
		return nil, agent.Errorf(agent.CodeAgentSpawnFailed, "antigravity: %s %s; install agy or fix agents.antigravity.executable", l.Executable, why)
	}
	program, err := os.Executable()
	if err != nil {
		return nil, agent.Errorf(agent.CodeAgentSpawnFailed, "antigravity: cannot name bhw-run's own binary for the hook: %v", err)
	}
	h, err := newHooks(hookRecords(l), l.WorkFolder, program)
	if err != nil {
		return nil, agent.Errorf(agent.CodeAgentSpawnFailed, "antigravity: %v", err)
	}
	env := withoutVar(l.Env, SocketEnv)
	if gated(l.Permissions) {
		if s.bridge, err = startBridge(); err != nil {
			return nil, agent.Errorf(agent.CodeAgentSpawnFailed, "antigravity: cannot open the gate's socket: %v; check TMPDIR", err)
		}
		if s.hold, err = h.acquire(); err != nil {
			s.bridge.close()
			return nil, agent.Errorf(agent.CodeAgentSpawnFailed, "antigravity: %v", err)
		}
		env = append(env, SocketEnv+"="+s.bridge.path)
	} else if err := h.recoverLeft(); err != nil {
		s.logger.Warn("could not put back the hooks.json a killed run left", "error", err)
	}
	s.Proc, err = proc.Start(proc.Config{Path: "/bin/sh", Args: append([]string{"-c", holder, l.Executable}, args...),
		Dir: l.WorkFolder, Env: env, Log: l.Log, MaxLine: l.MaxLine, KillGrace: l.KillGrace, Confine: l.Confine})
	if err != nil {
		s.bridge.close()
		_ = s.hold.release()
		return nil, agent.Errorf(agent.CodeAgentSpawnFailed, "antigravity: start %s: %v", l.Executable, err)
	}
	s.ExitWait, s.KillGrace = s.Proc.StdinGrace, s.Proc.KillGrace
	if s.bridge != nil {
		s.Proc.Logf("gate: the hook in %s relays to %s", h.file, s.bridge.path)
	}
	return s, nil
}

func withoutVar(env []string, name string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// Interrupt asks agy to stop the turn (SIGINT to its group); the turn ends
// interrupted, and an agy that does not stop is ended by Close.
func (s *Session) Interrupt() error {
	s.Proc.Interrupting()
	s.mu.Lock()
	s.interrupted = true
	s.mu.Unlock()
	if err := syscall.Kill(-s.Pgid(), syscall.SIGINT); err != nil && err != syscall.ESRCH {
		return err
	}
	return nil
}

// Close ends the process group first, then the bridge (every hook still
// waiting is denied), then puts the work folder's hooks.json back when
// this was the last run holding it: never the other way round, or a
// surviving agy would run its calls with no gate at all.
func (s *Session) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.Proc.SetGraces(s.ExitWait, s.KillGrace)
		s.closeErr = s.Proc.Close(ctx)
		// The hooks agy started are in its group, and may outlive it.
		if proc.GroupAlive(s.Pgid()) {
			proc.StopGroup(s.Pgid(), s.KillGrace)
		}
		// A hook orphaned by agy's end is reaped by init, not by us: wait
		// a little for it, so the group is gone when Close returns.
		for deadline := time.Now().Add(2 * time.Second); proc.GroupAlive(s.Pgid()) && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		s.bridge.close()
		if err := s.hold.release(); err != nil {
			s.logger.Warn("could not put back the work folder's hooks.json", "error", err)
			s.Proc.Logf("could not put back the work folder's hooks.json: %v", err)
		}
	})
	return s.closeErr
}

// Turn gives agy the message and relays its stream until its result line,
// the gate parks a call, or ctx ends. One Session runs one turn: agy is
// one process per turn.
func (s *Session) Turn(ctx context.Context, message string, h agent.Handler) (agent.TurnResult, error) {
	start := time.Now()
	s.mu.Lock()
	again := s.turned
	s.turned, s.interrupted = true, false
	s.mu.Unlock()
	if again {
		return agent.TurnResult{}, agent.Errorf(agent.CodeAgentCrashed, "antigravity: agy runs one turn per process; start another session")
	}
	if strings.ContainsRune(message, 0) {
		s.Proc.Logf("the message holds NUL bytes, which a command line cannot carry: removed")
		message = strings.ReplaceAll(message, "\x00", "")
	}
	if len(message) > maxMessage {
		return agent.TurnResult{}, agent.Errorf(agent.CodeAgentSpawnFailed,
			"antigravity: the message is %d bytes and agy takes it on its command line, at most %d; send a shorter message", len(message), maxMessage)
	}
	if err := s.Proc.WriteLine([]byte(strconv.Itoa(len(message)) + "\n" + message)); err != nil {
		return agent.TurnResult{}, s.crashed("writing the message: " + err.Error())
	}

	t := &turn{s: s, h: h, dec: &decoder{}}
	defer t.denyWaiting("bhw-run: the turn has ended")
	var reqs <-chan *hookRequest
	if s.bridge != nil {
		reqs = s.bridge.reqs
	}
	var grace, drain, match <-chan time.Time
	exited := s.Proc.Done()
	ctxDone := ctx.Done()
	finish := func(r agent.TurnResult) (agent.TurnResult, error) {
		t.emit(t.dec.flush())
		r.DurationMS = time.Since(start).Milliseconds()
		if grace != nil {
			return r, ctx.Err()
		}
		return r, nil
	}
	ended := func() (agent.TurnResult, error) {
		t.emit(t.dec.flush())
		r, err := t.endWithoutResult(ctx)
		if err == nil && grace != nil {
			err = ctx.Err()
		}
		return r, err
	}
	for {
		select {
		case line, ok := <-s.Proc.Lines():
			if !ok {
				return ended()
			}
			if r, end := t.line(line); end {
				return finish(r)
			}
			if t.parked {
				return finish(agent.TurnResult{Outcome: agent.TurnParked})
			}
		case r := <-reqs:
			t.request(r)
			if t.parked {
				return finish(agent.TurnResult{Outcome: agent.TurnParked})
			}
		case <-match:
			match = nil
		case <-ctxDone:
			ctxDone = nil
			s.Proc.Logf("turn cancelled (%v): interrupting", context.Cause(ctx))
			_ = s.Interrupt()
			timer := time.NewTimer(s.TurnGrace)
			defer timer.Stop()
			grace = timer.C
		case <-grace:
			s.Proc.Logf("no result %v after the interrupt", s.TurnGrace)
			return finish(agent.TurnResult{Outcome: agent.TurnInterrupted})
		case <-exited:
			exited, drain = nil, time.After(proc.ExitDrain)
		case <-drain:
			return ended()
		}
		// A hook call whose ACTIVE step has not come is decided once it
		// comes, or when its wait is over.
		if len(t.waiting) > 0 {
			if d := time.Until(t.waiting[0].since.Add(matchWait)); d <= 0 {
				t.decideWaiting()
			} else if match == nil {
				match = time.After(d)
			}
			if t.parked {
				return finish(agent.TurnResult{Outcome: agent.TurnParked})
			}
		}
	}
}

func (s *Session) crashed(what string) error {
	return agent.Errorf(agent.CodeAgentCrashed, "antigravity: %s (%s)%s", what, s.Proc.ExitStatus(time.Second), s.Proc.StderrTail())
}

// turn is the state of one Turn.
type turn struct {
	s   *Session
	h   agent.Handler
	dec *decoder

	// active are the tool calls the stream announced (ACTIVE) that no hook
	// call has been matched to yet, oldest first; waiting the hook calls
	// that came before their ACTIVE step.
	active  []activeCall
	waiting []waitingCall
	// unstepped counts, per tool, the hook calls decided before their
	// ACTIVE step came: that step, when it comes, is theirs, not a later
	// call's.
	unstepped map[string]int

	parked bool
}

type activeCall struct{ id, tool string }

type waitingCall struct {
	r     *hookRequest
	since time.Time
}

func (t *turn) emit(items []agent.Item) {
	for _, it := range items {
		t.h.Emit(it)
	}
}

// line handles one line of the stream; end reports the result line.
func (t *turn) line(line proc.Line) (agent.TurnResult, bool) {
	if line.Over > 0 {
		t.s.Proc.Logf("skipped a line of %d bytes (over the line limit); it began: %.200s", line.Over, line.Data)
		return agent.TurnResult{}, false
	}
	if len(bytes.TrimSpace(line.Data)) == 0 {
		return agent.TurnResult{}, false
	}
	items, known, err := t.dec.feed(line.Data)
	if err != nil {
		t.s.Proc.Logf("skipped a line that is not JSON: %v", err)
		return agent.TurnResult{}, false
	}
	if !known {
		t.s.Proc.Logf("skipped an event bhw-run does not know: %.200s", line.Data)
	}
	if id := t.dec.conversationID; id != "" && t.s.SessionID() != id {
		t.s.SetSessionID(id)
	}
	for _, it := range items {
		t.h.Emit(it)
		if it.Type() == agent.ItemToolCall {
			tool, _ := it.Meta["tool"].(map[string]any)
			name, _ := tool["name"].(string)
			id, _ := tool["invocation_id"].(string)
			if t.unstepped[name] > 0 {
				t.unstepped[name]--
				continue
			}
			t.active = append(t.active, activeCall{id: id, tool: name})
			t.matchWaiting()
			if t.parked {
				return agent.TurnResult{}, false
			}
		}
	}
	if t.dec.result == nil {
		return agent.TurnResult{}, false
	}
	return t.result(), true
}

func (t *turn) result() agent.TurnResult {
	calls := 0
	if t.s.bridge != nil {
		calls = int(t.s.bridge.calls.Load())
	}
	r := t.dec.outcome(t.s.bridge != nil, calls)
	t.s.mu.Lock()
	interrupted := t.s.interrupted
	t.s.mu.Unlock()
	switch {
	case t.s.l.Resume && !t.dec.sawInit && r.Outcome == agent.TurnFailed && conversationNotFound(t.dec.result.Error):
		r.ResumeFailed = true
	case interrupted && r.Outcome != agent.TurnCompleted:
		r.Outcome, r.ErrorText = agent.TurnInterrupted, ""
	}
	if r.Outcome == agent.TurnInterrupted {
		r.ErrorText = ""
	}
	return r
}

// conversationNotFound says an error is agy's for a --conversation it does
// not know.
func conversationNotFound(text string) bool {
	l := strings.ToLower(text)
	return strings.Contains(l, "conversation") && strings.Contains(l, "not found")
}

// endWithoutResult: the stream ended (or agy exited) before its result.
// An agy that ends so is AGENT_CRASHED, saying its exit and last stderr,
// unless the turn was being interrupted.
func (t *turn) endWithoutResult(ctx context.Context) (agent.TurnResult, error) {
	select {
	case <-t.s.Proc.Done():
	case <-time.After(t.s.ExitWait):
	}
	t.s.mu.Lock()
	interrupted := t.s.interrupted
	t.s.mu.Unlock()
	if ctx.Err() != nil {
		return agent.TurnResult{Outcome: agent.TurnInterrupted}, ctx.Err()
	}
	if interrupted {
		return agent.TurnResult{Outcome: agent.TurnInterrupted}, nil
	}
	if tail := t.s.Proc.Stderr(); !t.dec.sawInit && len(tail) > 0 {
		// Refused flags, a refused sign-in: agy said why before it began.
		return agent.TurnResult{}, agent.Errorf(agent.CodeAgentSpawnFailed, "antigravity: agy ended before it started (%s): %s",
			t.s.Proc.ExitStatus(time.Second), tail[len(tail)-1])
	}
	return agent.TurnResult{}, t.s.crashed("agy ended before its result line")
}

// request takes one hook call: matched to its ACTIVE step it is decided at
// once, else it waits a little for the step.
func (t *turn) request(r *hookRequest) {
	if t.parked {
		r.answer <- deny("bhw-run: the turn is parked")
		return
	}
	for i, a := range t.active {
		if a.tool == r.name {
			t.active = append(t.active[:i:i], t.active[i+1:]...)
			t.decide(r, a.id)
			return
		}
	}
	t.waiting = append(t.waiting, waitingCall{r: r, since: time.Now()})
}

func (t *turn) matchWaiting() {
	for len(t.waiting) > 0 && len(t.active) > 0 && !t.parked {
		w := t.waiting[0]
		matched := false
		for i, a := range t.active {
			if a.tool == w.r.name {
				t.active = append(t.active[:i:i], t.active[i+1:]...)
				t.waiting = t.waiting[1:]
				t.decide(w.r, a.id)
				matched = true
				break
			}
		}
		if !matched {
			return
		}
	}
}

// decideWaiting decides the hook calls whose wait for their step is over,
// without a call id.
func (t *turn) decideWaiting() {
	for len(t.waiting) > 0 && !t.parked && time.Since(t.waiting[0].since) >= matchWait {
		w := t.waiting[0]
		t.waiting = t.waiting[1:]
		if t.unstepped == nil {
			t.unstepped = map[string]int{}
		}
		t.unstepped[w.r.name]++
		t.decide(w.r, "")
	}
}

func (t *turn) denyWaiting(reason string) {
	for _, w := range t.waiting {
		w.r.answer <- deny(reason)
	}
	t.waiting = nil
}

// parkReason is what agy is told of a call parked for a person; agy is
// ended right after, so the model never acts on it.
const parkReason = "bhw-run: this call waits for a person's approval; the turn ends here and resumes with the answer"

// decide puts one hook call to the gate and answers the hook. A park is a
// deny with a reason, then agy is stopped: the person's answer resumes the
// conversation, and an approved call runs once under its grant.
func (t *turn) decide(r *hookRequest, id string) {
	in := r.args
	if !isObject(in) {
		in = json.RawMessage("{}")
	}
	var args map[string]any
	_ = json.Unmarshal(in, &args)
	c := policy.Call{Tool: r.name, Effect: toolEffect(r.name), InvocationID: id, Input: in,
		Target: toolTarget(r.name, args), Fingerprint: fingerprint(r.name, in), Kind: policy.KindApproval}
	c.Summary = policy.Summary(r.name, c.Target)
	if r.name == "ask_question" {
		c.Kind, c.Questions = policy.KindAskUserQuestion, questions(args)
	}
	v := t.h.Decide(c)
	if c.Kind == policy.KindAskUserQuestion && v.Action == policy.Allow {
		v = policy.Verdict{Action: policy.Park}
	}
	switch v.Action {
	case policy.Allow:
		r.answer <- verdict{Decision: "allow"}
	case policy.Park:
		r.answer <- deny(parkReason)
		t.parked = true
		t.s.Proc.Logf("call %s (%s) parked for a person: agy is stopped", id, grantKey(r.name, args))
		_ = syscall.Kill(-t.s.Pgid(), syscall.SIGTERM)
		t.emit(t.dec.flush())
		t.h.Emit(agent.ParkedResultItem(id))
	default:
		msg := v.Message
		if msg == "" {
			msg = "denied by bhw-run's policy"
		}
		r.answer <- deny(msg)
	}
}

// questions reads ask_question's arguments as one question, its options
// when it gives any.
func questions(args map[string]any) []policy.Question {
	q := policy.Question{Question: firstString(args, "Question", "question", "Prompt", "prompt")}
	if opts, ok := args["Options"].([]any); ok {
		for _, o := range opts {
			if s, ok := o.(string); ok {
				q.Options = append(q.Options, policy.Option{Label: s})
			}
		}
	}
	if q.Question == "" {
		b, _ := json.Marshal(args)
		q.Question = string(b)
	}
	return []policy.Question{q}
}
