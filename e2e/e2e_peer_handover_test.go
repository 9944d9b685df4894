//go:build realcli

package e2e

// Hand-over tests with the real daemon on one thread, daemon → bhw-run →
// daemon, played by blobhub-worker's scripted agent type test_double on
// both sides (the worker's script format, TEST_DOUBLE_SCRIPT, re-read by
// both each turn): a park made by each side answered on the other, for a
// question and for a gated call; a one-shot grant each side leaves spent
// by the other; active and pending threads in a section with a
// session_prefix. Each ends with wantHandedOver: nothing lost, nothing
// posted or asked twice, nothing left open.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/claude"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/run"
)

// doubleType is the agent type of these tests.
var doubleType = claude.TestDouble.Type

// doublePeer is a peer env whose threads run test_double: bhw-run reads
// the script's path from agents.test_double.env, the daemon from its own
// environment.
type doublePeer struct {
	*claudeE2E
	worker string
	script string
}

// newDoublePeer is a peer env for test_double threads, its section
// watching prefix ("" for the whole session).
func newDoublePeer(t *testing.T, prefix string) *doublePeer {
	e, worker := newPeerE2E(t, 2)
	p := &doublePeer{claudeE2E: e, worker: worker, script: filepath.Join(e.root, "double.json")}
	e.agentConfig(doubleType).Env = map[string]string{claude.TestDoubleScriptEnv: p.script}
	e.Config.Sections[0].Session.SessionPrefix = prefix
	e.writePeerConfig(2)
	return p
}

// play makes turns the script both sides play from their next turn on.
func (p *doublePeer) play(turns ...map[string]any) {
	p.t.Helper()
	b, err := json.Marshal(map[string]any{"turns": turns})
	if err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(p.script, b, 0o600); err != nil {
		p.t.Fatal(err)
	}
}

// daemon starts the daemon with the script.
func (p *doublePeer) daemon() *daemon {
	return p.startDaemon(p.worker, claude.TestDoubleScriptEnv+"="+p.script)
}

// daemonUntil starts the daemon, waits until the thread's items satisfy
// ok, and stops it.
func (p *doublePeer) daemonUntil(alias, what string, ok func([]blobhub.Item) bool) {
	p.t.Helper()
	d := p.daemon()
	p.waitItems(d, alias, what, ok)
	p.stopDaemon(d)
}

// daemonTakes starts the daemon, which adopts alias from the tree, posts
// message, waits until the thread's items satisfy until(alias) (made
// before the post, so it counts from there), and stops the daemon.
func (p *doublePeer) daemonTakes(alias, message, what string, until func(alias string) func([]blobhub.Item) bool) {
	p.t.Helper()
	d := p.daemon()
	p.recovered(d, alias)
	ok := until(alias)
	p.post(alias, message)
	p.waitItems(d, alias, what, ok)
	p.stopDaemon(d)
}

// runnable reports whether `bhw-run ls --runnable`, the cron line's
// discovery, lists alias.
func (p *doublePeer) runnable(alias string) bool {
	p.t.Helper()
	code, out, _ := p.run("ls", "--runnable")
	if code != 0 {
		p.t.Fatalf("ls --runnable exit %d", code)
	}
	return slices.Contains(strings.Fields(out), alias)
}

// cron is the cron line's pass for alias: discovery lists it, and its
// run ends with outcome.
func (p *doublePeer) cron(alias, outcome string) {
	p.t.Helper()
	if !p.runnable(alias) {
		p.t.Fatalf("ls --runnable does not list %s, which has work: %v", alias, p.itemTypes(alias))
	}
	p.activate(alias, 0, outcome)
}

// waiting fails when discovery lists alias, which waits on a person.
func (p *doublePeer) waiting(alias string) {
	p.t.Helper()
	if p.runnable(alias) {
		p.t.Errorf("ls --runnable lists %s, which waits on a person", alias)
	}
}

// ask is one question of a script's prompt.
func ask(q string, multi bool, options ...string) map[string]any {
	opts := []any{}
	for _, o := range options {
		opts = append(opts, map[string]any{"label": o, "description": ""})
	}
	return map[string]any{"question": q, "header": "pick", "options": opts, "multiSelect": multi}
}

// asks is a script turn that says text (none if ""), then puts the
// questions to a person as one prompt of kind.
func asks(match, text, kind string, questions ...map[string]any) map[string]any {
	t := says(match, text)
	if text == "" {
		delete(t, "text")
	}
	qs := make([]any, len(questions))
	for i, q := range questions {
		qs[i] = q
	}
	t["prompt"] = map[string]any{"kind": kind, "questions": qs}
	return t
}

// question is a script turn that says text, then asks one question with
// options (kind ask_user_question).
func question(match, text, q string, options ...string) map[string]any {
	return asks(match, text, "ask_user_question", ask(q, false, options...))
}

// says is a script turn that says text; with match "", it plays for any
// message.
func says(match, text string) map[string]any {
	t := map[string]any{"text": text}
	if match != "" {
		t["match"] = match
	}
	return t
}

// writes is a script turn that writes path (a call the gate asks a
// person about under approval), then says text.
func writes(match, path, text string) map[string]any {
	t := says(match, text)
	if text == "" {
		delete(t, "text")
	}
	t["tools"] = []any{map[string]any{"name": "Write", "input": map[string]any{"file_path": path, "content": "c"}, "output": "written " + path}}
	return t
}

// countTurnEnds counts the thread's turn_end items.
func (p *doublePeer) turnEnds(alias string) func([]blobhub.Item) bool {
	n := countType(p.t, p.items(alias), "turn_end")
	return func(items []blobhub.Item) bool { return countType(p.t, items, "turn_end") > n }
}

// prompts counts the thread's pending_prompt items.
func (p *doublePeer) prompts(alias string) func([]blobhub.Item) bool {
	n := countType(p.t, p.items(alias), "pending_prompt")
	return func(items []blobhub.Item) bool { return countType(p.t, items, "pending_prompt") > n }
}

// handedOver is what the thread must hold at the end: the agent's texts,
// each once and in this order, and how many prompts were asked.
type handedOver struct {
	texts   []string
	prompts int
	// granted are the prompt ids whose grant a call ran on, each once.
	granted []string
	// reasked counts the questions asked again after their answer (a
	// denied call tried again); any other repeat is a question asked twice.
	reasked int
}

// wantHandedOver checks the thread after the hand-overs: every text the
// script said is there once and in order (a message delivered twice
// plays its turn twice; one lost, never); no item id or emission posted
// twice; each question asked once and each prompt resolved once, none
// left open (on the thread or in thread.yaml's park); each grant spent
// once, on the call it was given for.
func (p *doublePeer) wantHandedOver(alias string, want handedOver) {
	t := p.t
	t.Helper()
	items := p.items(alias)
	var texts []string
	ids := map[string]bool{}
	asked := map[string]int{}   // question text → pending_prompt items
	prompts := map[string]int{} // prompt_id → pending_prompt items
	resolved := map[string]int{}
	granted := map[string]int{}
	for _, it := range items {
		if ids[it.ID] {
			t.Errorf("item %s is on the thread twice", it.ID)
		}
		ids[it.ID] = true
		m := meta(t, it)
		switch m.Type {
		case "text":
			texts = append(texts, it.Content[0].Text)
		case "pending_prompt":
			id, _ := m.Prompt["prompt_id"].(string)
			prompts[id]++
			qs, _ := m.Prompt["questions"].([]any)
			for _, q := range qs {
				text, _ := q.(map[string]any)["question"].(string)
				asked[text]++
			}
		case "pending_prompt_resolved":
			id, _ := m.Prompt["prompt_id"].(string)
			resolved[id]++
		case "approval_granted":
			by, _ := m.All["granted_by"].(string)
			granted[by]++
		}
	}
	wantEachEmissionOnce(t, p.e2eEnv, alias)
	if strings.Join(texts, "|") != strings.Join(want.texts, "|") {
		t.Errorf("the agent's texts on the thread %q, want %q (each once, in order)\nitems %v", texts, want.texts, p.itemTypes(alias))
	}
	if len(prompts) != want.prompts {
		t.Errorf("%d prompts asked, want %d: %v", len(prompts), want.prompts, prompts)
	}
	repeats := 0
	for _, n := range asked {
		repeats += n - 1
	}
	if repeats != want.reasked {
		t.Errorf("questions asked again %d times, want %d: %v", repeats, want.reasked, asked)
	}
	for id, n := range prompts {
		if n != 1 || resolved[id] != 1 {
			t.Errorf("prompt %s: %d pending_prompt, %d pending_prompt_resolved items; want one of each", id, n, resolved[id])
		}
	}
	for id, n := range resolved {
		if prompts[id] == 0 {
			t.Errorf("prompt %s resolved %d times and never asked", id, n)
		}
	}
	if fmt.Sprint(granted) != fmt.Sprint(countOnce(want.granted)) {
		t.Errorf("calls run on a grant, by prompt: %v, want %v", granted, countOnce(want.granted))
	}
	th := p.threadYAML(alias)
	if th.Prompt != nil || th.Agent.Grant != nil {
		t.Errorf("thread.yaml leaves open: park %+v, grant %+v", th.Prompt, th.Agent.Grant)
	}
}

// countOnce maps each of ids to 1.
func countOnce(ids []string) map[string]int {
	m := map[string]int{}
	for _, id := range ids {
		m[id] = 1
	}
	return m
}

// promptID is the prompt_id of the thread's last pending_prompt.
func (p *doublePeer) promptID(alias string) string {
	p.t.Helper()
	ps := p.itemsOfType(alias, "pending_prompt")
	if len(ps) == 0 {
		p.t.Fatalf("no pending_prompt on %s: %v", alias, p.itemTypes(alias))
	}
	id, _ := meta(p.t, ps[len(ps)-1]).Prompt["prompt_id"].(string)
	return id
}

// daemonAsksToWrite hands alias off under approval with the message
// message, whose turn writes path; the daemon runs it until it asks about
// the Write and is stopped. It returns the question's prompt id.
func (p *doublePeer) daemonAsksToWrite(alias, message, path string) string {
	p.t.Helper()
	p.play(writes(message, path, ""))
	p.handOff(alias, doubleType, "approval", message)
	p.daemonUntil(alias, "the question about "+filepath.Base(path), p.prompts(alias))
	return p.promptID(alias)
}

// wantParkedOn fails unless thread.yaml parks on the prompt id.
func (p *doublePeer) wantParkedOn(alias, id, who string) {
	p.t.Helper()
	if th := p.threadYAML(alias); th.Prompt == nil || th.Prompt.PromptID != id {
		p.t.Fatalf("after %s, thread.yaml parks on %+v; want prompt %s", who, th.Prompt, id)
	}
}

// TestPeerHandOverQuestionBothWays: on one test_double thread the daemon
// asks two questions in one prompt (one of them multiple choice) and is
// stopped while it waits; bhw-run takes the person's picks (the daemon's
// prompt resolved once with them, the answer delivered as the next
// message with the message posted after it) and its turn asks a question
// and parks; the daemon, started
// again, takes the answer to bhw-run's question, and its turn asks for
// free text (the worker's kind text) and is stopped while it waits;
// bhw-run takes that answer as an answer, not as an approval. Each
// question asked once, each prompt resolved once with the person's
// answer, every text said once, nothing open.
func TestPeerHandOverQuestionBothWays(t *testing.T) {
	p := newDoublePeer(t, "")
	const alias = "peer/questions"
	p.play(
		asks("ORDER-PLEASE", "ASKING", "ask_user_question", ask("Which colour?", false, "Red", "Blue"),
			ask("Which toppings?", true, "Nuts", "Cream", "Fruit")),
		question("Nuts, Fruit", "ORDER-TAKEN", "Which size?", "Small", "Large"),
		asks("Large", "LARGE-CHOSEN", "text", map[string]any{"question": "Any notes for the baker?"}),
		says("no nuts after all", "NOTED"),
		// Only a message delivered a second time, alone, plays this.
		says("ALSO-CHERRY", "CHERRY-AGAIN"),
	)
	p.handOff(alias, doubleType, "approval", "ORDER-PLEASE")

	// The daemon asks, holds the wait, and parks on SIGTERM.
	p.daemonUntil(alias, "the order's questions", p.prompts(alias))
	order := p.promptID(alias)
	p.wantParkedOn(alias, order, "the daemon")
	p.waiting(alias)

	// bhw-run adopts the daemon's park; the picks answer it and resume
	// the agent.
	p.srv.PostAs(bhtest.PersonUserID, bhtest.SessionID, alias, blobhub.NewItem{
		Content: []blobhub.Block{{Type: "text", Text: "Blue; Nuts, Fruit"}},
		Metadata: json.RawMessage(`{"answers":[{"question":"Which colour?","answer":["Blue"]},` +
			`{"question":"Which toppings?","answer":["Nuts","Fruit"]}]}`)})
	p.post(alias, "ALSO-CHERRY") // pending behind the answer: the same turn takes it
	cherry := p.items(alias)[len(p.items(alias))-1].ID
	p.cron(alias, run.OutcomeParked)
	if ids := p.threadYAML(alias).Turn.InboundIDs; !slices.Contains(ids, cherry) {
		t.Errorf("bhw-run's turn delivered %v, not the message %s posted after the answer", ids, cherry)
	}
	size := p.promptID(alias)
	if size == order {
		t.Fatalf("bhw-run's turn asked nothing new: %v", p.itemTypes(alias))
	}
	p.wantParkedOn(alias, size, "bhw-run")

	// The daemon adopts bhw-run's park and takes the answer; its turn
	// asks for free text and holds that wait.
	p.daemonTakes(alias, "Large", "the notes question", p.prompts)
	notes := p.promptID(alias)
	p.wantParkedOn(alias, notes, "the daemon")
	p.waiting(alias)

	// bhw-run takes the free text.
	p.post(alias, "no nuts after all")
	p.cron(alias, run.OutcomeTurnCompleted)

	p.wantHandedOver(alias, handedOver{texts: []string{"ASKING", "ORDER-TAKEN", "LARGE-CHOSEN", "NOTED"}, prompts: 3})
	want := map[string]string{order: "ask_user_question [[Blue] [Nuts Fruit]]", size: "ask_user_question [[Large]]",
		notes: "text [[no nuts after all]]"}
	for _, it := range p.itemsOfType(alias, "pending_prompt_resolved") {
		m := meta(t, it)
		var picked []string
		answers, _ := m.Prompt["answers"].([]any)
		for _, a := range answers {
			picked = append(picked, fmt.Sprint(a.(map[string]any)["answer"]))
		}
		got := fmt.Sprintf("%v [%s]", m.Prompt["kind"], strings.Join(picked, " "))
		if id, _ := m.Prompt["prompt_id"].(string); m.Prompt["prompt_state"] != "answered" || got != want[id] || m.Decision != "" {
			t.Errorf("prompt %s resolved %s (%v, decision %q), want answered %s", id, got, m.Prompt["prompt_state"], m.Decision, want[id])
		}
	}
	if th := p.threadYAML(alias); th.Agent.State != envelope.StateActive {
		t.Errorf("the thread ends %q, want active", th.Agent.State)
	}
}

// writesRun are the results of the scripted Writes that ran, in order,
// joined by |.
func (p *doublePeer) writesRun(alias string) string {
	var outputs []string
	for _, it := range p.itemsOfType(alias, "tool_result") {
		if out, _ := meta(p.t, it).Tool["output"].(string); strings.HasPrefix(out, "written ") {
			outputs = append(outputs, out)
		}
	}
	return strings.Join(outputs, "|")
}

// wantGrant fails unless thread.yaml holds the one-shot grant of prompt
// id for the Write of path, in the worker's shape.
func (p *doublePeer) wantGrant(alias, id, path, who string) {
	p.t.Helper()
	g := p.threadYAML(alias).Agent.Grant
	if g == nil || g.Subject != "Write" || g.Verdict != envelope.GrantApprove || g.GrantedBy != id || g.GrantKey != "Write:"+path {
		p.t.Fatalf("after %s, thread.yaml's grant is %+v; want Write's for %s, granted by %s", who, g, path, id)
	}
}

// TestPeerHandOverGrantsBothWays: on one test_double thread under
// approval, the daemon asks about a Write and is stopped while it waits;
// bhw-run takes the person's yes, and its resumed agent asks a question
// before retrying the call: the one-shot grant bhw-run leaves in
// thread.yaml beside its park is spent by the daemon, which takes the
// answer and writes without asking (approval_granted naming the daemon's
// prompt). Then bhw-run parks on a second Write; the daemon, started
// after the person said yes, takes it, and its turn ends without retrying (the worker keeps the grant
// past the turn): bhw-run's next turn spends it. Every call asked about
// once, every grant spent once, every message played once, nothing open.
func TestPeerHandOverGrantsBothWays(t *testing.T) {
	p := newDoublePeer(t, "team/")
	const alias = "team/grants"
	a, b := p.path("a.txt"), p.path("b.txt")

	first := p.daemonAsksToWrite(alias, "WRITE-A", a)
	p.wantParkedOn(alias, first, "the daemon")
	p.waiting(alias)

	// bhw-run: the yes answers the daemon's prompt; the agent asks
	// before it retries, so the grant stays with the park.
	p.play(question("", "A-LATER", "Which branch?", "main", "dev"))
	p.post(alias, "yes")
	p.cron(alias, run.OutcomeParked)
	branch := p.promptID(alias)
	p.wantParkedOn(alias, branch, "bhw-run's answer")
	p.wantGrant(alias, first, a, "bhw-run's answer")

	// The daemon takes the answer and spends bhw-run's grant.
	p.play(writes("main", a, "A-WRITTEN"))
	p.daemonTakes(alias, "main", "the turn that writes a.txt", p.turnEnds)
	if g := p.threadYAML(alias).Agent.Grant; g != nil {
		t.Fatalf("the daemon left the grant %+v", g)
	}

	// bhw-run parks on b.txt; the daemon takes the yes.
	p.play(writes("WRITE-B", b, ""))
	p.post(alias, "WRITE-B")
	p.cron(alias, run.OutcomeParked)
	second := p.promptID(alias)
	p.wantParkedOn(alias, second, "bhw-run")
	p.play(says("", "B-LATER"))
	ends := p.turnEnds(alias)
	p.post(alias, "yes") // while nobody runs: the daemon finds it when it starts
	d := p.daemon()
	p.waitItems(d, alias, "the turn the yes resumes", ends)
	p.stopDaemon(d)
	p.wantGrant(alias, second, b, "the daemon's answer")

	// bhw-run spends the daemon's grant.
	p.play(writes("NOW-B", b, "B-WRITTEN"))
	p.post(alias, "NOW-B")
	p.cron(alias, run.OutcomeTurnCompleted)

	p.wantHandedOver(alias, handedOver{texts: []string{"A-LATER", "A-WRITTEN", "B-LATER", "B-WRITTEN"}, prompts: 3, granted: []string{first, second}})
	if outputs := p.writesRun(alias); outputs != "written "+a+"|written "+b {
		t.Errorf("the Writes that ran: %q, want a.txt's then b.txt's, once each", outputs)
	}
}

// TestPeerHandOverPrefixedSection: in a section with a session_prefix,
// whose records live in the worker's job folder
// jobs/{type}-{session}-{slug}-{8 hex}, an active thread goes daemon →
// bhw-run → daemon → bhw-run, and a pending one (handed off while no
// daemon runs, its message not yet consumed) bhw-run → daemon. Each side
// finds the other's thread.yaml there; every message a person posted
// between runs is delivered once, by whichever runs next; nothing is
// posted twice or left open.
func TestPeerHandOverPrefixedSection(t *testing.T) {
	p := newDoublePeer(t, "team/")
	const active, pending = "team/active", "team/pending"
	p.play(says("A-ONE", "A-1"), says("A-TWO", "A-2"), says("A-THREE", "A-3"), says("A-FOUR", "A-4"),
		says("B-ONE", "B-1"), says("B-TWO", "B-2"))

	p.handOff(active, doubleType, "approval", "A-ONE")
	p.daemonUntil(active, "the first turn", p.turnEnds(active))
	jobs, err := os.ReadDir(filepath.Join(p.state, "jobs"))
	if err != nil || len(jobs) != 1 || !regexp.MustCompile(`^session_agent_harness-`+bhtest.SessionID+`-team-[0-9a-f]{8}$`).MatchString(jobs[0].Name()) {
		t.Fatalf("the daemon's job folders %v (%v), want one named for the prefix", jobs, err)
	}
	if filepath.Base(p.jobDir()) != jobs[0].Name() {
		t.Fatalf("bhw-run's job folder %s, the daemon's %s", filepath.Base(p.jobDir()), jobs[0].Name())
	}

	// No daemon: bhw-run answers the active thread and takes up the
	// pending one.
	p.post(active, "A-TWO")
	p.cron(active, run.OutcomeTurnCompleted)
	p.handOff(pending, doubleType, "approval", "B-ONE")
	p.cron(pending, run.OutcomeTurnCompleted)

	// Messages posted while nobody runs; the daemon delivers each once.
	p.post(active, "A-THREE")
	p.post(pending, "B-TWO")
	d := p.daemon()
	for _, alias := range []string{active, pending} {
		want := map[string]string{active: "A-3", pending: "B-2"}[alias]
		p.waitItems(d, alias, "the turn that says "+want, func(items []blobhub.Item) bool {
			for i, it := range items {
				if meta(t, it).Type == "text" && it.Content[0].Text == want {
					return countType(t, items[i:], "turn_end") > 0
				}
			}
			return false
		})
	}
	p.stopDaemon(d)

	p.post(active, "A-FOUR")
	p.cron(active, run.OutcomeTurnCompleted)

	p.wantHandedOver(active, handedOver{texts: []string{"A-1", "A-2", "A-3", "A-4"}})
	p.wantHandedOver(pending, handedOver{texts: []string{"B-1", "B-2"}})
	if jobs, _ := os.ReadDir(filepath.Join(p.state, "jobs")); len(jobs) != 1 {
		t.Errorf("job folders %v, want the prefixed section's only", jobs)
	}
	for _, alias := range []string{active, pending} {
		if th := p.threadYAML(alias); th.Session.SessionPrefix != "team/" || th.Agent.State != envelope.StateActive {
			t.Errorf("%s: session_prefix %q, state %q", alias, th.Session.SessionPrefix, th.Agent.State)
		}
	}
}

// wantDenied fails unless prompt id was resolved as the person's denial
// and thread.yaml holds no grant.
func (p *doublePeer) wantDenied(alias, id, who string) {
	p.t.Helper()
	for _, it := range p.itemsOfType(alias, "pending_prompt_resolved") {
		m := meta(p.t, it).Prompt
		if m["prompt_id"] != id {
			continue
		}
		answers, _ := m["answers"].([]any)
		if m["prompt_state"] != "answered" || len(answers) != 1 || fmt.Sprint(answers[0].(map[string]any)["answer"]) != "[Deny]" {
			p.t.Errorf("%s resolved prompt %s %v, want answered Deny", who, id, m)
		}
	}
	if th := p.threadYAML(alias); th.Agent.Grant != nil || len(th.Grants) != 0 {
		p.t.Fatalf("after %s denied, thread.yaml grants %+v %v", who, th.Agent.Grant, th.Grants)
	}
}

// TestPeerHandOverDenialsBothWays: a person's no crosses over as a
// denial and leaves nothing to approve with: the daemon's question about
// a Write, denied on bhw-run, and bhw-run's, denied on the daemon (started
// after the person answered), resume each agent told not to retry, and
// the denied Write asked again by bhw-run's next turn is a new question,
// whose yes runs it once.
func TestPeerHandOverDenialsBothWays(t *testing.T) {
	p := newDoublePeer(t, "")
	const alias = "peer/denials"
	c, dPath := p.path("c.txt"), p.path("d.txt")

	first := p.daemonAsksToWrite(alias, "WRITE-C", c)
	p.play(says("", "C-SKIPPED"))
	p.post(alias, "no")
	p.cron(alias, run.OutcomeTurnCompleted)
	p.wantDenied(alias, first, "bhw-run")

	p.play(writes("WRITE-D", dPath, ""))
	p.post(alias, "WRITE-D")
	p.cron(alias, run.OutcomeParked)
	second := p.promptID(alias)
	p.play(says("", "D-SKIPPED"))
	ends := p.turnEnds(alias)
	p.post(alias, "no")
	p.daemonUntil(alias, "the turn the no resumes", ends)
	p.wantDenied(alias, second, "the daemon")

	// Asked again, the same call is a new question.
	p.play(writes("WRITE-D-AGAIN", dPath, ""))
	p.post(alias, "WRITE-D-AGAIN")
	p.cron(alias, run.OutcomeParked)
	third := p.promptID(alias)
	if third == second {
		t.Fatalf("the denied call ran without a question: %v", p.itemTypes(alias))
	}
	p.play(writes("", dPath, "D-WRITTEN"))
	p.post(alias, "yes")
	p.cron(alias, run.OutcomeTurnCompleted)

	// bhw-run's own grant lets the Write through with no approval_granted
	// item (docs/wire.md): none is expected.
	p.wantHandedOver(alias, handedOver{texts: []string{"C-SKIPPED", "D-SKIPPED", "D-WRITTEN"}, prompts: 3, reasked: 1})
	if outputs := p.writesRun(alias); outputs != "written "+dPath {
		t.Errorf("the Writes that ran: %q, want d.txt's once", outputs)
	}
}

// wantCancelled fails unless the thread's one prompt was resolved
// cancelled, once, and thread.yaml says completed with no park.
func (p *doublePeer) wantCancelled(alias, who string) {
	p.t.Helper()
	res := p.itemsOfType(alias, "pending_prompt_resolved")
	if len(res) != 1 || meta(p.t, res[0]).Prompt["prompt_state"] != "cancelled" {
		p.t.Errorf("after %s stopped %s: resolutions %v, want one cancelled: %v", who, alias, len(res), p.itemTypes(alias))
	}
	if th := p.threadYAML(alias); th.Agent.State != envelope.StateCompleted || th.Prompt != nil {
		p.t.Errorf("after %s stopped %s: state %q park %+v", who, alias, th.Agent.State, th.Prompt)
	}
}

// TestPeerHandOverStopWhileParked: a person stops a thread while it
// waits on a question the other side asked: bhw-run stops the thread the
// daemon parked, the daemon the one bhw-run parked; each retires the
// other's question (cancelled, once) and leaves the thread completed,
// nothing open.
func TestPeerHandOverStopWhileParked(t *testing.T) {
	p := newDoublePeer(t, "")
	const byDaemon, byRun = "peer/stop-daemon", "peer/stop-run"
	p.play(question("X-START", "X-ASKS", "Proceed?", "Go", "Wait"), question("Y-START", "Y-ASKS", "Proceed?", "Go", "Wait"))

	p.handOff(byDaemon, doubleType, "approval", "X-START")
	p.daemonUntil(byDaemon, "the question", p.prompts(byDaemon))
	p.asPerson("thread", "stop", byDaemon)
	p.cron(byDaemon, run.OutcomeStopped)
	p.wantCancelled(byDaemon, "bhw-run")

	p.handOff(byRun, doubleType, "approval", "Y-START")
	p.cron(byRun, run.OutcomeParked)
	p.asPerson("thread", "stop", byRun)
	p.daemonUntil(byRun, "the question's cancellation", func(items []blobhub.Item) bool {
		return countType(t, items, "pending_prompt_resolved") > 0
	})
	p.wantCancelled(byRun, "the daemon")

	p.wantHandedOver(byDaemon, handedOver{texts: []string{"X-ASKS"}, prompts: 1})
	p.wantHandedOver(byRun, handedOver{texts: []string{"Y-ASKS"}, prompts: 1})
}
