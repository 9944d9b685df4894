package cli

// The person's side of a thread (`bhw-run thread …`): these commands write
// what a person would — a new envelope, instance.state completed or
// pending — and post items as the person, never as the runner.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/policy"
	"github.com/blobhub/bhw-run/redact"
	"github.com/blobhub/bhw-run/run"
	"github.com/blobhub/bhw-run/setup"
)

// CheckPoster refuses a person post on BlobHub made with the runner's own
// identity, which the runner would filter out as its own item.
func checkPoster(ctx context.Context, s *setup.Setup, c blobhub.Client, log func(string)) error {
	if strings.HasPrefix(s.APIURL, "file://") {
		return nil
	}
	me, err := c.Me(ctx)
	if err != nil {
		return blobhub.AsExit(err, "users/me")
	}
	runner := setup.WorkerOwner(ctx, c)
	if runner == "" {
		if id, _ := setup.LoadIdentity(s.StateDir); id != nil {
			runner = id.UserID
		}
	}
	if runner == "" {
		log("cannot tell the runner's user; posting anyway (if it is the same user, the runner will ignore this item)")
		return nil
	}
	if runner == me.UserID {
		return exit.Errorf(exit.CodePosterIsRunner, "you would post as %s, the runner's own user, and the runner ignores its own items; post with another profile: --as PROFILE", me.UserID)
	}
	return nil
}

// fields are the envelope fields a person owns, as `thread new` and
// `thread edit` set them; a nil field is left as it is.
type fields struct {
	WorkFolder      *string // workspace.work_folder
	Agent           *string // agent.type
	Permissions     *string // agent.permissions ("": the machine's default)
	Model           *string // agent.model ("": the machine's default)
	Effort          *string // agent.effort ("": the machine's default)
	Executable      *string // agent.executable ("": the machine's default)
	Policy          *string // the policy file's path; its content goes to policy ("": none)
	ArtifactsSource *string // artifacts.source ("": no outbox)
	// agent.budget's caps ("" or 0: no cap)
	MaxCostUSD, MaxTurns, MaxTokens *string

	// policyNotes say how apply read a policy in bhw-run's older spelling
	// (it writes the worker's shape); the command warns with them.
	policyNotes []string
}

// warnPolicyNotes is the one-line warning that a policy in bhw-run's older
// spelling was written in the worker's shape.
func warnPolicyNotes(where string, notes []string, warn func(string)) {
	if len(notes) > 0 {
		warn(fmt.Sprintf("%s is in bhw-run's older policy spelling; written in blobhub-worker's shape instead (check it reads as you meant: docs/configuration.md, Policy): %s", where, strings.Join(notes, "; ")))
	}
}

// field is one envelope field of fields: the flag that sets it and where it
// lives in the envelope.
type field struct {
	flag  string
	value *string
	path  []string
}

func (f *fields) list() []field {
	md := func(p ...string) []string { return append([]string{"thread", "metadata"}, p...) }
	return []field{
		{"work-folder", f.WorkFolder, md("workspace", "work_folder")},
		{"agent", f.Agent, md("agent", "type")},
		{"permissions", f.Permissions, md("agent", "permissions")},
		{"model", f.Model, md("agent", "model")},
		{"effort", f.Effort, md("agent", "effort")},
		{"executable", f.Executable, md("agent", "executable")},
		{"policy", f.Policy, md("policy")},
		{"artifacts-source", f.ArtifactsSource, md("artifacts", "source")},
		{"max-cost-usd", f.MaxCostUSD, md("agent", "budget", "max_cost_usd")},
		{"max-turns", f.MaxTurns, md("agent", "budget", "max_turns")},
		{"max-tokens", f.MaxTokens, md("agent", "budget", "max_tokens")},
	}
}

// budgetValue is a budget flag's value as the envelope's JSON number;
// nil removes the cap ("" or 0).
func budgetValue(flag, v string) (json.RawMessage, error) {
	if v == "" || v == "0" {
		return nil, nil
	}
	ok := false
	if flag == "max-cost-usd" {
		f, err := strconv.ParseFloat(v, 64)
		ok = err == nil && f > 0 && !math.IsInf(f, 0)
	} else {
		n, err := strconv.ParseInt(v, 10, 64)
		ok = err == nil && n > 0
	}
	// The value is written into the envelope as it was typed, so it must be
	// spelled as a JSON number too: Go's parsers also take 0x1p-2, 1_000, +5.
	if !ok || !json.Valid([]byte(v)) {
		return nil, &exit.Error{Exit: exit.Usage, Code: exit.CodeBudgetInvalid,
			Message: fmt.Sprintf("--%s %q is not a number above 0 (dollars for --max-cost-usd, a whole number for --max-turns and --max-tokens); '' or 0 removes the cap", flag, v)}
	}
	return json.RawMessage(v), nil
}

// apply writes the fields that are set into raw, keeping every other key
// as written (the runner's read-modify-write does the same). An empty value
// removes an optional field; the work folder and agent type are always
// written, and the checks then refuse an empty one.
func (f *fields) apply(raw json.RawMessage) (json.RawMessage, error) {
	for _, fl := range f.list() {
		if fl.value == nil {
			continue
		}
		var err error
		v := *fl.value
		switch {
		case v == "" && fl.flag != "work-folder" && fl.flag != "agent":
			raw, err = envelope.DeletePath(raw, fl.path)
		case strings.HasPrefix(fl.flag, "max-"):
			var n json.RawMessage
			if n, err = budgetValue(fl.flag, v); err == nil {
				if n == nil {
					raw, err = envelope.DeletePath(raw, fl.path)
				} else {
					raw, err = envelope.SetPath(raw, fl.path, n)
				}
			}
		case fl.flag == "policy":
			var pol json.RawMessage
			if pol, f.policyNotes, err = readPolicy(v); err == nil {
				raw, err = envelope.SetPath(raw, fl.path, pol)
			}
		default:
			b, _ := json.Marshal(v)
			raw, err = envelope.SetPath(raw, fl.path, b)
		}
		var ee *exit.Error
		if err != nil && !errors.As(err, &ee) {
			// The envelope has a value that is no mapping on the way.
			return nil, exit.Usagef("cannot set --%s in the envelope: %v", fl.flag, err)
		}
		if err != nil {
			return nil, err
		}
	}
	return raw, nil
}

// readPolicy reads --policy FILE (YAML or JSON) into the envelope's JSON,
// always in blobhub-worker's shape; notes say how an older spelling was
// read.
func readPolicy(path string) (json.RawMessage, []string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, exit.Usagef("--policy: cannot read %s: %v", path, err)
	}
	p, err := policy.ParsePolicy(b)
	if err != nil {
		return nil, nil, &exit.Error{Exit: exit.Usage, Code: exit.CodePolicyInvalid, Message: fmt.Sprintf("--policy %s: %v", path, err), Err: err}
	}
	out, _ := json.Marshal(p)
	return out, p.Notes, nil
}

// checkHere warns about what the runner's machine will refuse if it is
// this one: a work folder that is not a directory here. The runner may be
// another host, so it is never refused.
func checkHere(wf string, warn func(string)) {
	if !filepath.IsAbs(wf) {
		return
	}
	fi, err := os.Stat(wf)
	switch {
	case err != nil:
		warn(fmt.Sprintf("work folder %s does not exist on this machine; the runner checks it on its own when it activates the thread (create the checkout, or fix it with `bhw-run thread edit --work-folder`)", wf))
	case !fi.IsDir():
		warn(fmt.Sprintf("work folder %s is not a directory on this machine; the runner checks it on its own when it activates the thread", wf))
	}
}

// newResult is what `thread new` prints with --json.
type newResult struct {
	Alias      string `json:"alias"`
	State      string `json:"state"`
	WorkFolder string `json:"work_folder"`
	Agent      string `json:"agent"`
	// ItemID is the first message's item, "" without one.
	ItemID string `json:"item_id,omitempty"`
}

// threadNew hands off a new thread: the envelope with state pending, and an
// optional first message. The checks of the activation checklist that hold
// on every machine run first; nothing is written when one fails.
func threadNew(ctx context.Context, s *setup.Setup, c blobhub.Client, alias string, f fields, message string, warn func(string)) (newResult, error) {
	res := newResult{Alias: alias, State: envelope.StatePending, WorkFolder: *f.WorkFolder, Agent: *f.Agent}
	raw, err := f.apply(envelope.NewThread("", "", "", alias))
	if err != nil {
		return res, err
	}
	env, err := envelope.Parse(raw)
	if err != nil {
		return res, err
	}
	if err := run.CheckHandOff(s, env); err != nil {
		return res, err
	}
	checkHere(env.WorkFolder, warn)
	if f.Policy != nil {
		warnPolicyNotes("--policy "+*f.Policy, f.policyNotes, warn)
	}
	handOffWarnings(s, env, alias, message, warn)
	if _, err := c.Download(ctx, alias); err == nil {
		return res, exit.Errorf(exit.CodeThreadExists, "thread %q already exists; post to it with `bhw-run thread post`, change it with `bhw-run thread edit`, or pick another alias", alias)
	} else if !errors.Is(err, blobhub.ErrNotFound) {
		return res, blobhub.AsExit(err, "download "+alias)
	}
	if err := c.Upload(ctx, alias, raw); err != nil {
		return res, blobhub.AsExit(err, "upload "+alias)
	}
	if message != "" {
		it, err := threadPost(ctx, c, alias, message)
		if err != nil {
			return res, err
		}
		res.ItemID = it.ID
	}
	return res, nil
}

// editResult is what `thread edit` did, as --json prints it.
type editResult struct {
	Alias string `json:"alias"`
	// Changed are the flags whose field changed, in the order of the flags.
	Changed []string `json:"changed"`
	// From and State are instance.state before and after the edit.
	From  string `json:"from"`
	State string `json:"state"`
}

// threadEdit changes the fields a person owns, with the checks of `thread
// new`. The work folder, the agent type and the executable are fixed when a
// thread is activated: an edit of one of them sets an active thread back to
// pending in the same write, so the next run activates it again with the
// new values (in a new agent session). The other fields take effect on the
// next turn.
func threadEdit(ctx context.Context, s *setup.Setup, c blobhub.Client, alias string, f fields, warn func(string)) (editResult, error) {
	res := editResult{Alias: alias, Changed: []string{}}
	obj, env, err := run.DownloadJob(ctx, c, alias)
	if err != nil {
		return res, err
	}
	res.From, res.State = env.State, env.State
	raw, err := f.apply(obj.Value)
	if err != nil {
		return res, err
	}
	nenv, err := envelope.Parse(raw)
	if err != nil {
		return res, err
	}
	if f.Policy != nil {
		warnPolicyNotes("--policy "+*f.Policy, f.policyNotes, warn)
	} else if nenv.Policy != nil && len(nenv.Policy.Notes) > 0 && nenv.Bad["policy"] == "" {
		// The thread's policy is in bhw-run's older spelling: this write
		// puts it in the worker's shape, which the worker reads no wider.
		pol, _ := json.Marshal(*nenv.Policy)
		if raw, err = envelope.SetPath(raw, []string{"thread", "metadata", "policy"}, pol); err != nil {
			return res, exit.Usagef("cannot rewrite the thread's policy: %v", err)
		}
		warnPolicyNotes("the thread's policy", nenv.Policy.Notes, warn)
	}
	refixed := false
	for _, fl := range f.list() {
		if fl.value != nil && !jsonEqual(pathValue(obj.Value, fl.path), pathValue(raw, fl.path)) {
			res.Changed = append(res.Changed, fl.flag)
			refixed = refixed || fl.flag == "work-folder" || fl.flag == "agent" || fl.flag == "executable"
		}
	}
	if len(res.Changed) == 0 {
		return res, nil
	}
	if err := run.CheckHandOff(s, nenv); err != nil {
		return res, err
	}
	if f.WorkFolder != nil {
		checkHere(nenv.WorkFolder, warn)
	}
	// instance.state as it is now, not as it was before the checks: a run
	// may have written it since (BlobHub has no conditional write), and an
	// edit must not put back the state it read (docs/state.md).
	_, now, err := run.DownloadJob(ctx, c, alias)
	if err != nil {
		return res, err
	}
	res.From, res.State = now.State, now.State
	if refixed && now.State == envelope.StateActive {
		res.State = envelope.StatePending
	}
	if res.State != env.State {
		if raw, err = envelope.WithState(raw, res.State); err != nil {
			return res, err
		}
	}
	if err := c.Upload(ctx, alias, raw); err != nil {
		return res, blobhub.AsExit(err, "upload "+alias)
	}
	return res, nil
}

// pathValue is the JSON at path in raw, nil when it is not there.
func pathValue(raw json.RawMessage, path []string) json.RawMessage {
	for _, k := range path {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			return nil
		}
		raw = m[k]
	}
	return raw
}

func jsonEqual(x, y json.RawMessage) bool {
	if x == nil || y == nil {
		return x == nil && y == nil
	}
	var a, b any
	return json.Unmarshal(x, &a) == nil && json.Unmarshal(y, &b) == nil && reflect.DeepEqual(a, b)
}

// fixFlags are, for the checklist's codes, the flag of `thread new` and
// `thread edit` that sets what the check refused, and a value to show.
var fixFlags = []struct {
	flag, example string
	codes         []string
}{
	{"--work-folder", "/absolute/path/of/the/checkout", []string{exit.CodeWorkFolderNotAbsolute, exit.CodeWorkFolderNotFound, exit.CodeWorkFolderNotADir, exit.CodeWorkFolderNotReadable, exit.CodeWorkFolderNotAllowed}},
	{"--agent", "", []string{exit.CodeAgentTypeUnsupported}}, // the default agent's type
	{"--permissions", "approval", []string{exit.CodePermissionsUnsupported, exit.CodeAutonomousForbidden}},
	{"--policy", "policy.yaml", []string{exit.CodePolicyMissing, exit.CodePolicyInvalid}},
	{"--executable", "''", []string{exit.CodeExecutableNotAllowed}},
	{"--artifacts-source", ".bhw/outbox", []string{exit.CodeArtifactsSourceInvalid}},
	{"--max-turns", "20", []string{exit.CodeBudgetInvalid}},
}

// flagOf is the flag that sets what code refused, and a value to show
// (defaultAgent for --agent); "" for a code no flag fixes.
func flagOf(code, defaultAgent string) (flag, example string) {
	for _, f := range fixFlags {
		if slices.Contains(f.codes, code) {
			if f.flag == "--agent" {
				return f.flag, defaultAgent
			}
			return f.flag, f.example
		}
	}
	return "", ""
}

// refused names the flag that sets what a check of `thread new` or `thread
// edit` refused.
func refused(err error) error {
	var ee *exit.Error
	if errors.As(err, &ee) && ee.Exit == exit.Usage {
		if fl, _ := flagOf(ee.Code, ""); fl != "" && !strings.Contains(ee.Message, fl) {
			return &exit.Error{Exit: ee.Exit, Code: ee.Code, Message: ee.Message + " (" + fl + ")", Err: ee.Err}
		}
	}
	return err
}

// fixFor is the command that fixes a thread failed with code, and lets it
// run again; defaultAgent is the --agent it shows.
func fixFor(alias, code, defaultAgent string) string {
	retry := "bhw-run thread retry " + shellQuote(alias)
	flag, example := flagOf(code, defaultAgent)
	switch {
	case flag == "":
		return "fix the cause (the runner's logs/thread.log of the thread says more), then " + retry
	case flag == "--policy":
		return "bhw-run thread edit " + shellQuote(alias) + " --policy policy.yaml && " + retry + "   (or --permissions approval)"
	}
	return "bhw-run thread edit " + shellQuote(alias) + " " + flag + " " + example + " && " + retry
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+:@%=,", r))
	}) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// failure is why a thread failed.
type failure struct {
	Code, Message string
	At            time.Time // zero when not known
}

// threadFailure is why the failed thread alias failed: from this state
// tree's thread.yaml when it holds the thread, and from the worker thread's
// last thread_failed item for it, which also says when. nil when neither
// says.
func threadFailure(ctx context.Context, c blobhub.Client, jobDir, alias string) *failure {
	var f *failure
	if jobDir != "" {
		t, _ := envelope.LoadThread(filepath.Join(setup.ThreadDir(jobDir, alias), "thread.yaml"))
		if t != nil && t.Agent.State == envelope.StateFailed {
			if code, msg, ok := t.Agent.Error.Get(); ok {
				f = &failure{Code: code, Message: msg}
			}
		}
	}
	var last *failure
	_, _, _ = blobhub.TailEach(ctx, c, setup.WorkerAlias, blobhub.Cursor{}, showLimits, func(it blobhub.Item) bool {
		// blobhub-worker's shape has thread {alias, error}; an earlier
		// bhw-run put alias and error at the top of the metadata.
		type failed struct {
			Alias string `json:"alias"`
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		var m struct {
			Type   string `json:"type"`
			Thread failed `json:"thread"`
			failed
		}
		if json.Unmarshal(it.Metadata, &m) != nil || m.Type != "thread_failed" {
			return true
		}
		if m.Thread.Alias != "" {
			m.failed = m.Thread
		}
		if m.Alias == alias {
			at, _ := blobhub.ParseTime(it.CreatedAt)
			last = &failure{Code: m.Error.Code, Message: m.Error.Message, At: at}
		}
		return true
	})
	switch {
	case f == nil:
		return last
	case last != nil && last.Code == f.Code:
		f.At = last.At
	}
	return f
}

// editSummary is the person's line for res.
func editSummary(res editResult) string {
	if len(res.Changed) == 0 {
		return fmt.Sprintf("thread %s: nothing changed", res.Alias)
	}
	line := fmt.Sprintf("thread %s: changed %s", res.Alias, strings.Join(res.Changed, ", "))
	switch {
	case res.From == envelope.StateActive && res.State == envelope.StatePending:
		line += "; it was active, so it is pending again: the next run activates it with the new values (a new agent session)"
	case res.State == envelope.StateFailed:
		line += fmt.Sprintf("; it is failed: run `bhw-run thread retry %s` to run it again", shellQuote(res.Alias))
	case res.State == envelope.StateCompleted:
		line += "; it is completed, so no run acts on it"
	default:
		line += "; the next run uses the new values"
	}
	return line
}

// threadPost posts a person's item (which also answers a waiting question).
func threadPost(ctx context.Context, c blobhub.Client, alias, text string) (blobhub.Item, error) {
	if _, err := c.Download(ctx, alias); errors.Is(err, blobhub.ErrNotFound) {
		return blobhub.Item{}, exit.Errorf(exit.CodeNoThread, "there is no thread %q; create it with `bhw-run thread new`", alias)
	}
	it, err := c.Post(ctx, alias, blobhub.NewItem{Content: []blobhub.Block{{Type: "text", Text: text}}, Metadata: json.RawMessage("{}")})
	if err != nil {
		return it, blobhub.AsExit(err, "post to "+alias)
	}
	return it, nil
}

// threadSetState is the person's write of instance.state (stop: completed;
// retry: failed → pending, or active with no local record → pending).
func threadSetState(ctx context.Context, s *setup.Setup, c blobhub.Client, alias, to string) (string, error) {
	obj, env, err := run.DownloadJob(ctx, c, alias)
	if err != nil {
		return "", err
	}
	if to == envelope.StatePending {
		switch env.State {
		case envelope.StateFailed:
		case envelope.StateActive:
			t, _ := envelope.LoadThread(filepath.Join(setup.ThreadDir(s.JobDir, alias), "thread.yaml"))
			if t != nil && t.Agent.State == envelope.StateActive {
				return "", exit.Errorf(exit.CodeThreadActive, "thread %q is active and this state tree runs it; nothing to retry", alias)
			}
		default:
			return "", exit.Errorf(exit.CodeNotRetryable, "thread %q is %s; only a failed thread (or an active one with no local state) can be retried", alias, orNone(env.State))
		}
	}
	nv, err := envelope.WithState(obj.Value, to)
	if err != nil {
		return "", err
	}
	if err := c.Upload(ctx, alias, nv); err != nil {
		return "", blobhub.AsExit(err, "upload "+alias)
	}
	return env.State, nil
}

func orNone(s string) string {
	if s == "" {
		return "without a state"
	}
	return s
}

// defaultShowPoll is how often `thread show --follow` asks for new items.
const defaultShowPoll = 2 * time.Second

// showOptions are `thread show`'s flags.
type showOptions struct {
	JSON   bool          // one item a line, as JSON
	Follow bool          // keep printing new items until ctx ends
	Poll   time.Duration // how often --follow asks (0: defaultShowPoll)
	// JobDir is the section's folder of this state tree, where a failed
	// thread's thread.yaml says why it failed ("": not looked at).
	JobDir string
	// DefaultAgent is the agent type a fix shows for --agent.
	DefaultAgent string
}

// threadShow prints the thread's state and items; with Follow it keeps
// printing new items until ctx ends (main cancels it on SIGINT/SIGTERM),
// and then returns nil.
func threadShow(ctx context.Context, c blobhub.Client, alias string, o showOptions, w io.Writer) error {
	poll, jsonOut, follow := o.Poll, o.JSON, o.Follow
	if poll <= 0 {
		poll = defaultShowPoll
	}
	obj, err := c.Download(ctx, alias)
	if errors.Is(err, blobhub.ErrNotFound) {
		return exit.Errorf(exit.CodeNoThread, "there is no thread %q", alias)
	}
	if err != nil {
		return blobhub.AsExit(err, "download "+alias)
	}
	env, _ := envelope.Parse(obj.Value)
	if !jsonOut && env != nil {
		fmt.Fprintf(w, "thread %s: %s (agent %s, work folder %s)\n", redact.Shown(alias), redact.Shown(orNone(env.State)), redact.Shown(env.Agent.Type), redact.Shown(env.WorkFolder))
		if env.State == envelope.StateFailed {
			printFailure(w, threadFailure(ctx, c, o.JobDir, alias), alias, o.DefaultAgent)
		}
		if o.JobDir != "" {
			t, _ := envelope.LoadThread(filepath.Join(setup.ThreadDir(o.JobDir, alias), "thread.yaml"))
			printLedger(w, t, env.Agent.Budget)
		}
	}
	show := func(it blobhub.Item) bool {
		if jsonOut {
			b, _ := json.Marshal(it)
			fmt.Fprintln(w, string(redact.ShownJSON(b)))
		} else {
			fmt.Fprintln(w, renderItem(it))
		}
		return true
	}
	if !follow {
		// Items are printed as read, never held; the bound stops a server
		// that keeps answering new items.
		_, more, err := blobhub.TailEach(ctx, c, alias, blobhub.Cursor{}, showLimits, show)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil
		case err != nil:
			return blobhub.AsExit(err, "read items of "+alias)
		case more:
			return exit.Errorf(exit.CodeUnavailable, "stopped after %d items of %q without reaching the end (a server that keeps answering new items?); pass --follow to read on", showLimits.Items, alias)
		}
		return nil
	}
	cur := blobhub.Cursor{}
	for {
		shown := 0
		next, more, err := blobhub.TailEach(ctx, c, alias, cur, blobhub.TailLimits, func(it blobhub.Item) bool {
			shown++
			return show(it)
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return blobhub.AsExit(err, "read items of "+alias)
		}
		cur = next
		if more && shown > 0 {
			continue // a long thread: read on at once
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(poll):
		}
	}
}

// printFailure tells a person why the thread failed and what fixes it.
func printFailure(w io.Writer, f *failure, alias, defaultAgent string) {
	if f == nil {
		fmt.Fprintf(w, "failed: no record of why here (the runner's host has it in its thread.log); then bhw-run thread retry %s\n", redact.Shown(shellQuote(alias)))
		return
	}
	when := ""
	if !f.At.IsZero() {
		when = " at " + f.At.Local().Format("2006-01-02 15:04:05")
	}
	fmt.Fprintf(w, "failed%s: %s: %s\n", when, redact.Shown(f.Code), redact.Shown(f.Message))
	fmt.Fprintf(w, "fix: %s\n", redact.Shown(fixFor(alias, f.Code, defaultAgent)))
}

// printLedger says what the thread's agent has spent (thread.yaml's
// ledger, on the runner's host), against its budget, and what holds it
// back.
func printLedger(w io.Writer, t *envelope.Thread, b envelope.Budget) {
	if t == nil || t.Ledger == nil {
		if !b.IsZero() {
			fmt.Fprintf(w, "budget: %s; nothing spent yet\n", budgetText(b))
		}
		return
	}
	l := t.Ledger
	s := l.Total
	fmt.Fprintf(w, "spent: $%.4f, %d tokens (%d in, %d out), %d agent turns, %s of turns, over %d activation(s)\n",
		s.CostUSD, s.Tokens(), s.InputTokens, s.OutputTokens, s.AgentTurns, (time.Duration(s.WallMS) * time.Millisecond).Round(time.Second), s.Activations)
	if n := len(l.Activations); n > 0 {
		last := l.Activations[n-1]
		fmt.Fprintf(w, "last activation %s: $%.4f, %d tokens, %d agent turns\n", redact.Shown(last.At), last.CostUSD, last.Tokens(), last.AgentTurns)
	}
	if !b.IsZero() {
		fmt.Fprintf(w, "budget: %s (the machine's agents.<type>.budget may lower it)\n", budgetText(b))
	}
	if len(l.BudgetSpent) > 0 {
		fmt.Fprintf(w, "budget spent (%s): no turn runs until a person raises it with bhw-run thread edit --max-cost-usd/--max-turns/--max-tokens\n", strings.Join(l.BudgetSpent, ", "))
	}
	if l.LimitedUntil != "" {
		fmt.Fprintf(w, "rate limited until %s: %s\n", redact.Shown(l.LimitedUntil), redact.Shown(l.Limit))
	}
	if l.AuthFailed != "" {
		fmt.Fprintf(w, "the agent's login failed: %s (AGENT_AUTH_FAILED; see the status item)\n", redact.Shown(l.AuthFailed))
	}
}

// budgetText is a budget's caps: "max_cost_usd $5, max_turns 40".
func budgetText(b envelope.Budget) string {
	var parts []string
	if b.MaxCostUSD > 0 {
		parts = append(parts, fmt.Sprintf("max_cost_usd $%g", b.MaxCostUSD))
	}
	if b.MaxTurns > 0 {
		parts = append(parts, fmt.Sprintf("max_turns %d", b.MaxTurns))
	}
	if b.MaxTokens > 0 {
		parts = append(parts, fmt.Sprintf("max_tokens %d", b.MaxTokens))
	}
	return strings.Join(parts, ", ")
}

// showLimits bounds `thread show` without --follow.
var showLimits = blobhub.Limits{Items: 100000}

// renderItem is one item for a person at a terminal, its wire text
// escaped (redact.Shown, redact.ShownText).
func renderItem(it blobhub.Item) string {
	var meta struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(it.Metadata, &meta)
	var text []string
	for _, b := range it.Content {
		if b.Text != "" {
			text = append(text, b.Text)
		} else if len(b.JSON) > 0 {
			text = append(text, string(b.JSON))
		}
	}
	who := "person"
	if meta.Type != "" {
		who = meta.Type
	}
	ts := it.CreatedAt
	if t, err := blobhub.ParseTime(it.CreatedAt); err == nil {
		ts = t.Local().Format("15:04:05")
	}
	body := redact.ShownText(strings.Join(text, "\n"))
	body = strings.ReplaceAll(body, "\n", "\n    ")
	return fmt.Sprintf("%s [%s] %s", redact.Shown(ts), redact.Shown(who), body)
}
