package policy

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// Source says whose rule it is.
type Source string

const (
	// SourceWorker is the machine owner's config (policy.rules).
	SourceWorker Source = "worker"
	// SourceThread is the thread's own policy.
	SourceThread Source = "thread"
)

// Match names the rule that decided a call. Index is 0-based in its list;
// people see it 1-based ("worker rule 2").
type Match struct {
	Source Source `json:"source" yaml:"source"`
	Index  int    `json:"index" yaml:"index"`
	Rule   Rule   `json:"rule" yaml:"rule"`
}

// String is how people see the rule: worker rule "no-rm" (exec deny
// "rm -rf *"), or its position when it has no id.
func (m Match) String() string {
	return fmt.Sprintf("%s rule %s", m.Source, m.Rule.Label(m.Index))
}

// Decision is the gate's judgement of one call.
type Decision struct {
	Decision string `json:"decision"` // allow | deny | ask
	// By is the rule that decided; nil when a default, the posture, a grant
	// or a question decided.
	By *Match `json:"by,omitempty"`
	// Granted is set when a one-shot grant allowed the call; the caller
	// consumes the grant with the call's fingerprint.
	Granted bool `json:"granted,omitempty"`
	// Part is the simple command (of a compound line) that decided, when the
	// call had more than one.
	Part string `json:"part,omitempty"`
	// Reading is how the deciding rule read the command when it was not as
	// written: its words after quote removal ("rm -rf /" for `\rm -rf /`),
	// past a wrapper, … Empty when the rule matched the source.
	Reading string `json:"reading,omitempty"`
	// Reason is for people: denied by worker rule 2 (exec "rm -rf *").
	Reason string `json:"reason"`
}

// Verdict turns the decision into what an adapter does: deny refuses with a
// message naming the rule, ask parks, allow runs.
func (d Decision) Verdict() Verdict {
	switch d.Decision {
	case DecisionAllow:
		return Verdict{Action: Allow}
	case DecisionDeny:
		return Verdict{Action: Deny, Message: "bhw-run policy: " + d.Reason}
	default:
		return Verdict{Action: Park}
	}
}

// Gate holds everything a decision depends on.
type Gate struct {
	Posture    string // autonomous | guarded | approval ("" = approval)
	Worker     []Rule // the machine owner's rules, always first
	Thread     Policy // the thread's policy (guarded)
	WorkFolder string // outside: work_folder compares paths with it
	// Outbox is the thread's artifacts outbox relative to the work folder
	// ("" when it has none), for outside: outbox (ResolveOutbox).
	Outbox string
	Grants []string
}

// RulesInForce lists the rules the gate consults under its posture, in the
// order it consults them (for the policy_applied item): every rule under
// guarded; only the machine owner's deny and ask rules under approval; none
// under autonomous.
func (g Gate) RulesInForce() []Match {
	var out []Match
	switch g.posture() {
	case PostureAutonomous:
		return nil
	case PostureGuarded:
		for i, r := range g.Worker {
			out = append(out, Match{SourceWorker, i, r})
		}
		for i, r := range g.Thread.Rules {
			out = append(out, Match{SourceThread, i, r})
		}
	default:
		for i, r := range g.Worker {
			if r.action() != DecisionAllow {
				out = append(out, Match{SourceWorker, i, r})
			}
		}
	}
	return out
}

func (g Gate) posture() string {
	switch g.Posture {
	case PostureAutonomous, PostureGuarded:
		return g.Posture
	default:
		// approval is the default, and an unknown posture fails closed to it.
		return PostureApproval
	}
}

// Decide judges one call (docs/gate.md). The order: the machine
// owner's deny rules; then a one-shot grant for the call's fingerprint; then
// the other rules, the machine owner's first and the thread's after, first
// match deciding, else the thread's default. Under approval only the machine
// owner's deny and ask rules apply and everything else is asked; under
// autonomous everything is allowed. A compound command line is split into its
// simple commands, each judged on its own; the call gets the strictest.
// Under guarded the call is also judged as blobhub-worker judges it
// (WorkerDecide), and the stricter answer wins: never looser than the worker.
func (g Gate) Decide(c Call) Decision {
	return g.evaluate(c, nil)
}

// Explain says, over several lines, how the gate decides a call and why. It
// runs the same code as Decide, so the two cannot disagree.
func Explain(g Gate, c Call) string {
	_, lines := ExplainLines(g, c)
	return strings.Join(lines, "\n") + "\n"
}

// ExplainLines is Explain as the decision and its lines.
func ExplainLines(g Gate, c Call) (Decision, []string) {
	var ex explainer
	d := g.evaluate(c, &ex)
	ex.printf("decision: %s (%s)", d.Decision, d.Reason)
	ex.printf("note: this cannot see what the agent approves by itself (Claude Code runs read-only calls in the work folder unasked; settings and hooks may approve more) nor what the Codex sandbox lets run without asking")
	return d, ex.lines
}

type explainer struct{ lines []string }

func (e *explainer) printf(format string, args ...any) {
	if e != nil {
		e.lines = append(e.lines, fmt.Sprintf(format, args...))
	}
}

// subject is one thing a rule is matched against: one simple command of an
// exec call, or the whole call for the other effects.
type subject struct {
	effect  string
	command string   // exec: the simple command as written, folded
	part    *part    // exec: its other readings; nil for a line judged as one string
	outside []string // read/write: the resolved paths outside the work folder
	paths   []string // read/write: the call's paths as the agent gave them
}

// raw reports whether the subject is text the gate could not split.
func (s subject) raw() bool { return s.part != nil && s.part.raw }

func strictness(decision string) int {
	switch decision {
	case DecisionAllow:
		return 0
	case DecisionDeny:
		return 2
	default:
		return 1
	}
}

func verb(decision string) string {
	switch decision {
	case DecisionAllow:
		return "allowed by"
	case DecisionDeny:
		return "denied by"
	default:
		return "held for a person by"
	}
}

func (g Gate) evaluate(c Call, ex *explainer) Decision {
	ex.printf("call: %s", c.Describe())
	posture := g.posture()
	if g.Posture != posture && g.Posture != "" {
		ex.printf("posture: %q is unknown, judged as approval", g.Posture)
	} else {
		ex.printf("posture: %s", posture)
	}
	if c.Kind == KindAskUserQuestion {
		return Decision{Decision: DecisionAsk, Reason: "the agent's own question, which always waits for a person"}
	}
	if posture == PostureAutonomous {
		return Decision{Decision: DecisionAllow, Reason: "the autonomous posture (no gate)"}
	}

	subjects, whole, over := g.subjects(c, ex)
	pm := g.newMatcher()

	// 1. The machine owner's deny rules: nothing relaxes them.
	denyRules := func(src Source, rules []Rule, s subject, part string) (Decision, bool) {
		for i, r := range rules {
			if r.action() != DecisionDeny {
				continue
			}
			if ok, f := pm.matches(r, s); ok {
				return ruleDecided(DecisionDeny, &Match{src, i, r}, part, s, f), true
			}
		}
		return Decision{}, false
	}
	for _, s := range subjects {
		if d, ok := denyRules(SourceWorker, g.Worker, s, partName(s, subjects)); ok {
			return d
		}
	}
	if whole != nil {
		if d, ok := denyRules(SourceWorker, g.Worker, *whole, whole.command); ok {
			return d
		}
	}
	ex.printf("machine owner's deny rules: none matches")

	// The worker's own reading of the call: bhw-run never answers looser.
	var wd *WorkerDecision
	if posture == PostureGuarded {
		w := WorkerDecide(g.Worker, g.Thread, g.WorkFolder, g.Outbox, c)
		wd = &w
	}

	// 2. A one-shot grant a person gave for exactly this call. A line past
	// the gate's limits was never checked in full against the machine
	// owner's deny rules, so while there are any a person cannot approve it.
	granted := c.Fingerprint != "" && slices.Contains(g.Grants, c.Fingerprint)
	if granted && over != "" && g.ownerDeniesExec() {
		ex.printf("one-shot grant: not for this line: it is over the gate's limits and the machine owner has exec deny rules it could not be checked against")
		granted = false
	} else if granted && wd != nil && wd.Action == DecisionDeny {
		ex.printf("one-shot grant: not for this call: blobhub-worker denies it (%s)", g.workerDecided(*wd).Reason)
		granted = false
	} else if granted {
		return Decision{Decision: DecisionAllow, Granted: true, Reason: "allowed by a one-shot grant (a person approved this exact call)"}
	}
	if len(g.Grants) > 0 && !granted {
		ex.printf("one-shot grants: none for this call's fingerprint %q", c.Fingerprint)
	}

	// 3. The other rules, part by part; the strictest part decides.
	var best Decision
	for i, s := range subjects {
		part := partName(s, subjects)
		d := g.decideSubject(c, posture, s, part, pm)
		if s.raw() && d.Decision == DecisionAllow {
			// Judged as one string, the text's commands were never seen one
			// by one: a rule or default may not allow it unasked.
			d = Decision{Decision: DecisionAsk, Part: d.Part, Reason: "held for a person: " + s.part.why + ", so its commands cannot be judged one by one (it would have been " + d.Reason + ")"}
		}
		if len(subjects) > 1 {
			ex.printf("part %q: %s", s.command, d.Reason)
		}
		if i == 0 || strictness(d.Decision) > strictness(best.Decision) {
			best = d
		}
	}
	if whole != nil && posture == PostureGuarded && best.Decision != DecisionDeny {
		// A thread deny rule written for a whole pipeline ("curl * | sh")
		// matches the compound line as a whole too; it can only be stricter.
		if d, ok := denyRules(SourceThread, g.Thread.Rules, *whole, whole.command); ok {
			ex.printf("the whole line: %s", d.Reason)
			best = d
		}
	}
	if wd != nil {
		w := g.workerDecided(*wd)
		if strictness(w.Decision) > strictness(best.Decision) {
			ex.printf("blobhub-worker's reading is stricter: %s", w.Reason)
			best = w
		} else {
			ex.printf("blobhub-worker's reading: %s", w.Reason)
		}
	}
	return best
}

// workerDecided is the worker's decision as the gate reports it.
func (g Gate) workerDecided(wd WorkerDecision) Decision {
	if wd.Origin == OriginDefault {
		return Decision{Decision: wd.Action, Reason: verb(wd.Action) + " the thread's default (no rule matches the call as blobhub-worker reads it)"}
	}
	src, rules := SourceWorker, g.Worker
	if wd.Origin == OriginThread {
		src, rules = SourceThread, g.Thread.Rules
	}
	if wd.Index < 0 || wd.Index >= len(rules) {
		return Decision{Decision: wd.Action, Reason: verb(wd.Action) + " " + wd.RuleID}
	}
	m := &Match{Source: src, Index: wd.Index, Rule: rules[wd.Index]}
	reason := verb(wd.Action) + " " + m.String() + " as blobhub-worker reads the call (its first matching rule decides)"
	if wd.RuleID == "policy_evaluation_error" {
		reason = "denied: " + m.String() + " has a command pattern blobhub-worker cannot read"
	}
	return Decision{Decision: wd.Action, By: m, Reason: reason}
}

// ownerDeniesExec reports whether the machine owner has an exec deny rule.
func (g Gate) ownerDeniesExec() bool {
	for _, r := range g.Worker {
		if r.Effect == EffectExec && r.action() == DecisionDeny {
			return true
		}
	}
	return false
}

// ruleDecided is the decision a rule gives a subject it matched in reading f
// (nil: as written).
func ruleDecided(decision string, m *Match, part string, s subject, f *form) Decision {
	d := Decision{Decision: decision, By: m, Part: part, Reason: verb(decision) + " " + m.String() + partSuffix(part)}
	if f != nil {
		d.Reading = f.text()
		if d.Reading != s.command {
			d.Reason += fmt.Sprintf(", reading %q as %q (%s)", s.command, d.Reading, f.note)
		}
		if f.wild() && decision != DecisionAllow {
			d.Reason += "; " + wildNote(*f) + ": write the command out in full"
		}
	}
	return d
}

// wildNote says which stretches of a reading the gate cannot know.
func wildNote(f form) string {
	var ws []string
	for _, s := range f.segs {
		if s.wild != known && !slices.Contains(ws, s.text) {
			ws = append(ws, s.text)
		}
	}
	if len(ws) == 1 {
		return quoteList(ws) + " is only known when the shell runs, and the rule matches some value of it"
	}
	return quoteList(ws) + " are only known when the shell runs, and the rule matches some value of them"
}

// decideSubject is step 3 for one part.
func (g Gate) decideSubject(c Call, posture string, s subject, part string, pm *matcher) Decision {
	decided := func(decision string, who string) Decision {
		return Decision{Decision: decision, Part: part, Reason: verb(decision) + " " + who + partSuffix(part)}
	}
	if posture == PostureApproval {
		for i, r := range g.Worker {
			if r.action() != DecisionAsk {
				continue
			}
			if ok, f := pm.matches(r, s); ok {
				return ruleDecided(DecisionAsk, &Match{SourceWorker, i, r}, part, s, f)
			}
		}
		return decided(DecisionAsk, "the approval posture (a person decides every call)")
	}
	if s.effect != "" {
		for i, r := range g.Worker {
			if r.action() == DecisionDeny {
				continue
			}
			if ok, f := pm.matches(r, s); ok {
				return ruleDecided(ruleDecision(r), &Match{SourceWorker, i, r}, part, s, f)
			}
		}
		for i, r := range g.Thread.Rules {
			if ok, f := pm.matches(r, s); ok {
				return ruleDecided(ruleDecision(r), &Match{SourceThread, i, r}, part, s, f)
			}
		}
	}
	def := g.Thread.DefaultDecision()
	if strictness(def) == 1 {
		def = DecisionAsk // an unknown default fails closed
	}
	return decided(def, "the thread's default")
}

// ruleDecision fails closed: a decision Validate would refuse is an ask.
func ruleDecision(r Rule) string {
	switch r.action() {
	case DecisionAllow, DecisionDeny:
		return r.action()
	}
	return DecisionAsk
}

func partName(s subject, all []subject) string {
	if len(all) > 1 {
		return s.command
	}
	return ""
}

func partSuffix(part string) string {
	if part == "" {
		return ""
	}
	return fmt.Sprintf(" for %q", part)
}

// subjects splits a call into what rules are matched against. whole is the
// full command line when it is compound (checked against deny rules too).
// over names the limit an exec line is past, "" when none.
func (g Gate) subjects(c Call, ex *explainer) (subjects []subject, whole *subject, over string) {
	switch c.Effect {
	case EffectExec:
		line := foldSpace(c.Target.Command)
		sp := splitLine(c.Target.Command)
		switch {
		case sp.over != "":
			ex.printf("command: over the gate's limits (%s); the commands before the limit are judged one by one, the line as one string, and the call is at best ask", sp.over)
		case sp.unparsed:
			ex.printf("command: does not parse as a shell line; judged as one string %q, and each statement before the error on its own", line)
		}
		if len(sp.parts) == 0 {
			return []subject{{effect: EffectExec, command: line}}, nil, sp.over
		}
		var sources []string
		for i := range sp.parts {
			p := &sp.parts[i]
			subjects = append(subjects, subject{effect: EffectExec, command: p.source, part: p})
			sources = append(sources, p.source)
		}
		if len(sources) > 1 || sources[0] != line {
			ex.printf("command parts: %s", quoteList(sources))
			if sp.over == "" && !sp.unparsed {
				whole = &subject{effect: EffectExec, command: line}
			}
		}
		for _, p := range sp.parts {
			if p.words != nil && p.words.text() != p.source {
				ex.printf("part %q: its words read %q", p.source, p.words.text())
			}
		}
		return subjects, whole, sp.over
	case EffectRead, EffectWrite:
		paths := append([]string(nil), c.Target.Paths...)
		if c.GrantRoot != "" && !slices.Contains(paths, c.GrantRoot) {
			paths = append(paths, c.GrantRoot)
		}
		if len(paths) == 0 {
			ex.printf("path: none given; counts as outside the work folder and the outbox")
		}
		return []subject{{effect: c.Effect, outside: g.outsidePaths(c, ex), paths: paths}}, nil, ""
	case "":
		ex.printf("effect: none; only the thread's default answers this call (under approval, a person)")
		return []subject{{}}, nil, ""
	default:
		return []subject{{effect: c.Effect}}, nil, ""
	}
}

// outsidePaths resolves every path of the call (and Codex's grantRoot) and
// keeps those outside the work folder. A path that cannot be resolved counts
// as outside, as written.
func (g Gate) outsidePaths(c Call, ex *explainer) []string {
	work, workOK := resolvePath(g.WorkFolder, "")
	if !workOK {
		ex.printf("work folder %q: cannot be resolved; every path counts as outside", g.WorkFolder)
	}
	base := c.Target.Cwd
	if !filepath.IsAbs(base) {
		base = work
	}
	paths := c.Target.Paths
	if c.GrantRoot != "" && !slices.Contains(paths, c.GrantRoot) {
		paths = append(slices.Clip(paths), c.GrantRoot)
	}
	var outside []string
	for _, p := range paths {
		// Cleaned first (a tool that normalises the path) and walked like the
		// kernel (a symlink before ".."): outside if either reading is.
		r, ok := resolvePath(p, base)
		rw, okw := resolveWalk(p, base)
		switch {
		case !ok || !okw:
			ex.printf("path %q: cannot be resolved; counts as outside the work folder", p)
			if filepath.IsAbs(p) {
				r = filepath.Clean(p)
			} else {
				r = p
			}
			outside = append(outside, r)
		case workOK && Within(work, r) && Within(work, rw):
			ex.printf("path %q: inside the work folder (%s); an outside: work_folder rule does not match it", p, r)
		default:
			for _, x := range []string{r, rw} {
				if (!workOK || !Within(work, x)) && !slices.Contains(outside, x) {
					ex.printf("path %q: outside the work folder (%s)", p, x)
					outside = append(outside, x)
				}
			}
		}
	}
	return outside
}

// matcher matches rules against subjects. It holds the work folder and the
// outbox as the worker resolves them (for outside: outbox), and bounds the
// work of matching readings with unknown words for one call.
type matcher struct {
	view  workerView
	cells int // mayMatch steps left
}

func (g Gate) newMatcher() *matcher {
	return &matcher{view: newWorkerView(g.WorkFolder, g.Outbox), cells: maxMatchCells}
}

// matches reports whether rule r matches subject s, and the reading it
// matched in (nil: as written). A command rule matches the source as
// written or the words the shell runs; a rule that holds calls back (deny,
// ask) also matches the readings of strictForms, and a reading with unknown
// words when some value of them matches (see words.go).
func (pm *matcher) matches(r Rule, s subject) (bool, *form) {
	if r.Effect != s.effect || s.effect == "" {
		return false, nil
	}
	if len(r.Command) > 0 && s.effect == EffectExec {
		for _, c := range r.Command {
			if ok, f := pm.matchesCommand(r, c, s); ok {
				return true, f
			}
		}
		return false, nil
	}
	switch r.Outside {
	case OutsideWorkFolder:
		return len(s.outside) > 0 || len(s.paths) == 0, nil
	case OutsideOutbox:
		if len(s.paths) == 0 {
			return true, nil
		}
		for _, p := range s.paths {
			if pm.view.leaves(pm.view.outbox, p) {
				return true, nil
			}
		}
		return false, nil
	}
	return true, nil
}

// matchesCommand is matches for one command glob of an exec rule.
func (pm *matcher) matchesCommand(r Rule, pattern string, s subject) (bool, *form) {
	if MatchCommand(pattern, s.command) {
		return true, nil
	}
	if s.part == nil {
		return false, nil
	}
	holds := ruleDecision(r) != DecisionAllow
	if w := s.part.words; w != nil {
		// An allow rule reads an unknown word as written, and never past
		// a leading assignment (FOO=1 git push is not git push to it: the
		// assignment may be GIT_SSH_COMMAND, LD_PRELOAD, PAGER, ...).
		if !w.wild() || !holds {
			if (holds || !s.part.assigns) && MatchCommand(pattern, w.text()) {
				return true, w
			}
		} else if mayMatch(pattern, *w, &pm.cells) {
			return true, w
		}
	}
	if !holds {
		return false, nil
	}
	for i := range s.part.strict {
		f := &s.part.strict[i]
		if f.wild() && mayMatch(pattern, *f, &pm.cells) || !f.wild() && MatchCommand(pattern, f.text()) {
			return true, f
		}
	}
	return false, nil
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}
