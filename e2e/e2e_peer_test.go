//go:build realcli

package e2e

// The hand-over between bhw-run and the real blobhub-worker daemon (the
// peer, installed by `make peer` into .tools/peer) on one profile's state
// tree: each continues a thread the other activated, reading the other's
// thread.yaml, section.yaml and identity.yaml. The daemon drives the same
// pinned Claude Code against the same scripted model as bhw-run does, and
// talks to the same test hub, whose events feed tells it what changed
// (docs/wire.md).

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/claude/claudetest"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/run"
	"github.com/blobhub/bhw-run/setup"
)

// peerProfile is the credentials profile the daemon and bhw-run share.
const peerProfile = "peer"

// peerWorker is the daemon of the peer's venv: BHW_PEER_PYTHON's
// blobhub-worker. Missing, the test skips, or fails under CI=true, where a
// missing peer is a broken set-up.
func peerWorker(t testing.TB) string {
	t.Helper()
	msg := "the peer is not installed: run `make peer` and pass BHW_PEER_PYTHON=.tools/peer/bin/python (make test does both)"
	if py := os.Getenv("BHW_PEER_PYTHON"); py != "" {
		w := filepath.Join(filepath.Dir(py), "blobhub-worker")
		if _, err := os.Stat(w); err == nil {
			return w
		}
		msg = "BHW_PEER_PYTHON=" + py + " has no blobhub-worker beside it; run `make peer`"
	}
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// newPeerE2E is a Claude Code env whose state tree is the daemon's tree of
// the profile peer under the env's HOME, with one section for the test
// hub's session in its config.yaml (read by both: each ignores the other's
// keys), and that profile in the BlobHub CLI's credentials file. The
// daemon runs at most maxAgents threads at once.
func newPeerE2E(t testing.TB, maxAgents int) (*claudeE2E, string) {
	worker := peerWorker(t)
	e := newClaudeE2E(t)
	e.state = filepath.Join(e.home, ".blobhub-worker", "profiles", peerProfile)
	if err := os.MkdirAll(e.state, 0o700); err != nil {
		t.Fatal(err)
	}
	e.Config.Sections = []setup.Section{{Name: "test", JobType: setup.JobType, Session: setup.SessionTuple{
		OrgID: bhtest.OrgID, BlobID: bhtest.BlobID, RevisionID: bhtest.RevisionID, SessionID: bhtest.SessionID}}}
	e.agentConfig(claudeType).Permissions = "approval"
	e.writePeerConfig(maxAgents)
	creds := map[string]any{"default": peerProfile, "profiles": map[string]any{
		peerProfile: map[string]any{"key": bhtest.RunnerKey, "url": e.srv.URL()}}}
	b, err := yaml.Marshal(creds)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(e.home, ".blobhub")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "credentials.yaml"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return e, worker
}

// writePeerConfig writes e.Config as config.yaml for both programs. What
// setup.Config marshals leaves out nothing: the daemon refuses its
// polling: null, and reads max_agents: 0 as no agent at all.
func (e *claudeE2E) writePeerConfig(maxAgents int) {
	e.t.Helper()
	e.writeConfig()
	var cfg map[string]any
	b, err := os.ReadFile(e.configPath())
	if err == nil {
		err = yaml.Unmarshal(b, &cfg)
	}
	if err != nil {
		e.t.Fatal(err)
	}
	delete(cfg, "polling")
	cfg["concurrency"] = map[string]any{"max_agents": maxAgents}
	if b, err = yaml.Marshal(cfg); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(e.configPath(), b, 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// daemon is a running blobhub-worker.
type daemon struct {
	cmd  *exec.Cmd
	out  *bytes.Buffer
	done chan struct{} // closed when it has exited
	err  error         // its Wait's, once done
}

// startDaemon starts `blobhub-worker start --profile peer` with the env's
// HOME and the scripted model's variables, so its Claude Code keeps its
// sessions in the same config folder as bhw-run's; env is added to its
// environment.
func (e *claudeE2E) startDaemon(worker string, env ...string) *daemon {
	e.t.Helper()
	d := &daemon{out: &bytes.Buffer{}, done: make(chan struct{})}
	d.cmd = exec.Command(worker, "--verbose", "start", "--profile", peerProfile)
	d.cmd.Env = []string{"HOME=" + e.home, "TMPDIR=" + e.tmp, "NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost"}
	for _, kv := range e.model.Env(e.configDir) {
		if !strings.HasPrefix(kv, "HOME=") {
			d.cmd.Env = append(d.cmd.Env, kv)
		}
	}
	d.cmd.Env = append(d.cmd.Env, env...)
	d.cmd.Dir = e.root
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		e.t.Fatalf("start blobhub-worker: %v", err)
	}
	go func() { d.err = d.cmd.Wait(); close(d.done) }()
	e.t.Cleanup(func() {
		// Its process group: the daemon's Claude Code goes with it.
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		<-d.done
	})
	return d
}

// stop stops the daemon as its operator does (SIGTERM: it drains and
// detaches) and waits for it, at most two minutes.
func (e *claudeE2E) stopDaemon(d *daemon) {
	e.t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
		e.t.Logf("blobhub-worker stopped (%v):\n%s", d.err, tail(d.out.String(), 8000))
	case <-time.After(2 * time.Minute):
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		<-d.done
		e.t.Fatalf("blobhub-worker did not stop within 2 minutes of SIGTERM:\n%s", tail(d.out.String(), 8000))
	}
}

// waitItems waits, at most three minutes, until the thread holds an item
// that ok accepts, and returns the thread's items then.
func (e *claudeE2E) waitItems(d *daemon, alias, what string, ok func([]blobhub.Item) bool) []blobhub.Item {
	e.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		items := e.items(alias)
		if ok(items) {
			return items
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the daemon did not post %s within 3 minutes; items %v\n%s", what, e.itemTypes(alias), tail(d.out.String(), 8000))
		}
		select {
		case <-d.done:
			e.t.Fatalf("the daemon exited (%v) before posting %s:\n%s", d.err, what, tail(d.out.String(), 8000))
		case <-tick.C:
		}
	}
}

// recovered waits until the daemon has adopted alias from the tree (its
// thread_recovered item on the worker's thread).
func (e *claudeE2E) recovered(d *daemon, alias string) {
	e.t.Helper()
	e.waitItems(d, "worker", "thread_recovered of "+alias, func(items []blobhub.Item) bool {
		for _, it := range items {
			if m := meta(e.t, it); m.Type == "thread_recovered" && m.Thread.Alias == alias {
				return true
			}
		}
		return false
	})
}

// countType counts the items of metadata.type typ.
func countType(t testing.TB, items []blobhub.Item, typ string) int {
	n := 0
	for _, it := range items {
		if meta(t, it).Type == typ {
			n++
		}
	}
	return n
}

// TestPeerHandOverDaemonToRun: the daemon activates a thread bhw-run's
// `thread new` handed off and answers its message with the real Claude
// Code; stopped, it leaves its thread.yaml, section.yaml and identity.yaml
// in the profile's tree. bhw-run, on that tree, delivers the person's next
// message into the same agent session, and only that message.
func TestPeerHandOverDaemonToRun(t *testing.T) {
	e, worker := newPeerE2E(t, 2)
	const alias = "peer/daemon-first"
	e.model.Push(claudetest.Text("DAEMON-ANSWER"))
	e.handOff(alias, claudeType, "approval", "FIRST-MESSAGE")

	d := e.startDaemon(worker)
	e.waitItems(d, alias, "a turn_end", func(items []blobhub.Item) bool { return countType(t, items, "turn_end") == 1 })
	e.stopDaemon(d)

	th := e.threadYAML(alias)
	if th.Agent.State != envelope.StateActive || th.Agent.AgentSessionID == "" || th.Items.LastConsumed.ItemID == "" {
		t.Fatalf("the daemon's thread.yaml: state %q agent_session_id %q last_consumed %+v", th.Agent.State, th.Agent.AgentSessionID, th.Items.LastConsumed)
	}
	for _, f := range []string{filepath.Join(e.state, "identity.yaml"), filepath.Join(e.jobDir(), "section.yaml")} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("the daemon left no %s: %v", f, err)
		}
	}
	session := th.Agent.AgentSessionID

	e.model.Push(claudetest.Text("RUN-ANSWER"))
	e.post(alias, "SECOND-MESSAGE")
	e.activate(alias, 0, run.OutcomeTurnCompleted)

	if got := e.threadYAML(alias).Agent.AgentSessionID; got != session {
		t.Errorf("bhw-run's turn ran in agent session %q, the daemon's was %q", got, session)
	}
	body := string(e.lastRequest().Body)
	if !strings.Contains(body, "DAEMON-ANSWER") || strings.Count(body, "FIRST-MESSAGE") != 1 || !strings.Contains(body, "SECOND-MESSAGE") {
		t.Errorf("the model's last request does not continue the daemon's conversation with the second message only:\n%s", tail(body, 4000))
	}
	items := e.items(alias)
	if countType(t, items, "turn_end") != 2 {
		t.Errorf("items %v, want one turn_end from each", e.itemTypes(alias))
	}
}

// TestPeerHandOverRunToDaemon: bhw-run parks a thread on a person's
// approval of a Write; the daemon, started on the same tree, adopts the
// open question from the thread's items (bhw-run's pending_prompt, in the
// worker's shape), takes the person's yes, posted while it polls, as its
// answer, resolves the prompt bhw-run posted, and resumes the same agent
// session, whose repeated Write the approval now covers.
func TestPeerHandOverRunToDaemon(t *testing.T) {
	e, worker := newPeerE2E(t, 2)
	const alias = "peer/run-first"
	x := e.handOffWrite(alias)
	e.activate(alias, 0, run.OutcomeParked)
	fileAbsent(t, x)
	prompt := meta(t, e.itemsOfType(alias, "pending_prompt")[0]).Prompt
	session := e.threadYAML(alias).Agent.AgentSessionID

	e.model.Push(writeTool(x, "approved content"), claudetest.Text("WRITTEN"))
	d := e.startDaemon(worker)
	e.recovered(d, alias)
	e.post(alias, "yes")
	items := e.waitItems(d, alias, "a second turn_end", func(items []blobhub.Item) bool { return countType(t, items, "turn_end") == 2 })
	e.stopDaemon(d)

	fileIs(t, x, "approved content")
	if n := countType(t, items, "pending_prompt"); n != 1 {
		t.Errorf("%d pending_prompt items, want bhw-run's only: %v", n, e.itemTypes(alias))
	}
	if m := meta(t, e.onlyOfType(alias, "pending_prompt_resolved")).Prompt; m["prompt_id"] != prompt["prompt_id"] || m["prompt_state"] != "answered" {
		t.Errorf("the daemon resolved %v; bhw-run's prompt was %v", m, prompt)
	}
	if n := countType(t, items, "approval_granted"); n != 1 {
		t.Errorf("%d approval_granted items, want 1 (the repeated Write ran on the person's yes): %v", n, e.itemTypes(alias))
	}
	if got := e.threadYAML(alias).Agent.AgentSessionID; got != session {
		t.Errorf("the daemon's turn ran in agent session %q, bhw-run's was %q", got, session)
	}
}

// sideBySide plays the same turn on each side: the model answers steps
// to the daemon on byDaemon until its turn_end, then to bhw-run on byRun,
// each thread handed off by handOff.
func (e *claudeE2E) sideBySide(worker, byDaemon, byRun string, handOff func(alias string), steps ...claudetest.Step) {
	e.t.Helper()
	e.model.Push(steps...)
	handOff(byDaemon)
	d := e.startDaemon(worker)
	e.waitItems(d, byDaemon, "a turn_end", func(items []blobhub.Item) bool { return countType(e.t, items, "turn_end") == 1 })
	e.stopDaemon(d)
	e.model.Push(steps...)
	handOff(byRun)
	e.activate(byRun, 0, run.OutcomeTurnCompleted)
}

// handOffMessage hands a thread off under approval with message.
func (e *claudeE2E) handOffMessage(message string) func(alias string) {
	return func(alias string) { e.handOff(alias, claudeType, "approval", message) }
}

// readTurn is a turn that reads path, which nobody is asked about, then
// says READ-DONE.
func readTurn(path string) []claudetest.Step {
	return []claudetest.Step{claudetest.Tool("Read", map[string]any{"file_path": path}), claudetest.Text("READ-DONE")}
}

// TestPeerItemsSideBySide: the daemon and bhw-run drive the same scripted
// turn (a Read in the work folder, which neither asks about, then text)
// with the same Claude Code; the items each posts are compared field by
// field. The types come in the same order, and every metadata field the
// daemon's item carries, nested ones included, bhw-run's carries too;
// what bhw-run adds beside them (docs/wire.md, "Items in a thread") is
// logged.
func TestPeerItemsSideBySide(t *testing.T) {
	e, worker := newPeerE2E(t, 2)
	in := e.path("in.txt")
	if err := os.WriteFile(in, []byte("one\ntwo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const byDaemon, byRun = "peer/by-daemon", "peer/by-run"
	e.sideBySide(worker, byDaemon, byRun, e.handOffMessage("read in.txt"), readTurn(in)...)

	theirs, ours := agentItems(t, e.items(byDaemon)), agentItems(t, e.items(byRun))
	var tt, ot []string
	for _, m := range theirs {
		tt = append(tt, m["type"].(string))
	}
	for _, m := range ours {
		ot = append(ot, m["type"].(string))
	}
	if strings.Join(tt, " ") != strings.Join(ot, " ") {
		t.Fatalf("item types: the daemon's %v, bhw-run's %v", tt, ot)
	}
	for i := range theirs {
		missing, extra := compareKeys("", theirs[i], ours[i])
		if len(missing) > 0 {
			t.Errorf("%s: bhw-run's item lacks the daemon's %v\n daemon: %v\nbhw-run: %v", tt[i], missing, theirs[i], ours[i])
		}
		if theirs[i]["status"] != ours[i]["status"] {
			t.Errorf("%s: status %v, the daemon's %v", tt[i], ours[i]["status"], theirs[i]["status"])
		}
		t.Logf("%s: bhw-run's own fields %v", tt[i], extra)
	}
}

// agentItems are the metadata of the items of items a program posted
// (those with a metadata.type).
func agentItems(t testing.TB, items []blobhub.Item) []map[string]any {
	var out []map[string]any
	for _, it := range items {
		var m map[string]any
		if json.Unmarshal(it.Metadata, &m) != nil || m["type"] == nil {
			continue
		}
		out = append(out, m)
	}
	return out
}

// firstWith is the first of alias's agent items whose key is value; it
// fails the test when there is none.
func (e *claudeE2E) firstWith(alias, key, value string) map[string]any {
	e.t.Helper()
	for _, m := range agentItems(e.t, e.items(alias)) {
		if m[key] == value {
			return m
		}
	}
	e.t.Fatalf("no %s on %s: %v", value, alias, e.itemTypes(alias))
	return nil
}

// compareKeys lists the keys of theirs that ours lacks, and those ours has
// beside them, nested maps compared key by key (a value of a different
// kind counts as missing).
func compareKeys(at string, theirs, ours map[string]any) (missing, extra []string) {
	for k, v := range theirs {
		o, ok := ours[k]
		if !ok {
			missing = append(missing, at+k)
			continue
		}
		if vm, isMap := v.(map[string]any); isMap {
			om, ok := o.(map[string]any)
			if !ok {
				missing = append(missing, at+k+" (not an object)")
				continue
			}
			m, x := compareKeys(at+k+".", vm, om)
			missing, extra = append(missing, m...), append(extra, x...)
		}
	}
	for k := range ours {
		if _, ok := theirs[k]; !ok {
			extra = append(extra, at+k)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	return missing, extra
}

// TestPeerCutItemsSideBySide: a tool result over the item budget (a Read
// of 90 KB) is cut by the daemon and by bhw-run alike: the same fields
// cut, the same excerpt of the output, local_log naming each one's
// thread.log in the same form, and neither item is refused.
func TestPeerCutItemsSideBySide(t *testing.T) {
	e, worker := newPeerE2E(t, 2)
	in := e.path("big.txt")
	var b strings.Builder
	for i := 0; b.Len() < 90_000; i++ {
		fmt.Fprintf(&b, "line %05d of a long file\n", i)
	}
	if err := os.WriteFile(in, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	const byDaemon, byRun = "peer/cut-daemon", "peer/cut-run"
	e.sideBySide(worker, byDaemon, byRun, e.handOffMessage("read big.txt"), readTurn(in)...)

	theirs, ours := e.firstWith(byDaemon, "type", "tool_result"), e.firstWith(byRun, "type", "tool_result")
	if fmt.Sprint(theirs["truncated_fields"]) != fmt.Sprint(ours["truncated_fields"]) || ours["truncated"] != true {
		t.Fatalf("truncated_fields: the daemon's %v, bhw-run's %v", theirs["truncated_fields"], ours["truncated_fields"])
	}
	tl, _ := theirs["local_log"].(string)
	ol, _ := ours["local_log"].(string)
	if strings.Replace(tl, byDaemon, byRun, 1) != ol || !strings.HasSuffix(ol, "/threads/"+byRun+"/logs/thread.log") {
		t.Fatalf("local_log: the daemon's %q, bhw-run's %q", tl, ol)
	}
	to, _ := theirs["tool"].(map[string]any)["output"].(string)
	oo, _ := ours["tool"].(map[string]any)["output"].(string)
	if strings.ReplaceAll(to, byDaemon, byRun) != oo {
		t.Fatalf("the cut output differs:\n daemon: %.200q…\nbhw-run: %.200q…", to, oo)
	}
}

// TestPeerPublishSideBySide: the daemon and bhw-run publish the same
// outbox of a thread with artifacts {prefix, outbox}: the same aliases
// (under each one's prefix), the same artifacts_published fields and file
// blocks, and every file downloads byte-identical from either's upload.
func TestPeerPublishSideBySide(t *testing.T) {
	e, worker := newPeerE2E(t, 2)
	files := map[string]string{"report.md": "# report\n", "my notes.txt": "notes", "sub/data.json": `{"a":1}`}
	handOff := func(alias, prefix, outbox string) {
		for rel, body := range files {
			p := filepath.Join(e.work, outbox, rel)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		e.handOff(alias, claudeType, "approval", "")
		o, _ := e.srv.Get(alias)
		raw, err := envelope.SetPath(o.Value, []string{"thread", "metadata", "artifacts"}, json.RawMessage(`{"prefix":"`+prefix+`","outbox":"`+outbox+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		e.srv.Put(alias, string(raw))
		e.post(alias, "publish")
	}
	const byDaemon, byRun = "peer/pub-daemon", "peer/pub-run"
	outboxes := map[string][2]string{byDaemon: {"pub/d/", ".out-d"}, byRun: {"pub/r/", ".out-r"}}
	e.sideBySide(worker, byDaemon, byRun, func(alias string) { handOff(alias, outboxes[alias][0], outboxes[alias][1]) }, claudetest.Text("done"))

	published := func(alias string) (map[string]any, []*blobhub.FileRef) {
		for _, it := range e.items(alias) {
			var m map[string]any
			if json.Unmarshal(it.Metadata, &m) == nil && m["type"] == "artifacts_published" {
				var refs []*blobhub.FileRef
				for _, b := range it.Content {
					if b.Type == "file" {
						refs = append(refs, b.File)
					}
				}
				return m, refs
			}
		}
		t.Fatalf("no artifacts_published on %s: %v", alias, e.itemTypes(alias))
		return nil, nil
	}
	tm, tf := published(byDaemon)
	om, of := published(byRun)
	if missing, _ := compareKeys("", tm, om); len(missing) > 0 {
		t.Errorf("bhw-run's artifacts_published lacks the daemon's %v\n daemon: %v\nbhw-run: %v", missing, tm, om)
	}
	if fmt.Sprint(tm["counts"]) != fmt.Sprint(om["counts"]) || len(tf) != len(of) || len(of) != len(files) {
		t.Fatalf("the daemon published %v (%d blocks), bhw-run %v (%d blocks)", tm["counts"], len(tf), om["counts"], len(of))
	}
	c := e.srv.Client(bhtest.PersonKey)
	for i := range tf {
		if strings.Replace(tf[i].Alias, "pub/d/", "pub/r/", 1) != of[i].Alias || tf[i].Name != of[i].Name || tf[i].Size != of[i].Size {
			t.Errorf("file block %d: the daemon's %+v, bhw-run's %+v", i, *tf[i], *of[i])
		}
		_, td, err1 := c.DownloadFile(t.Context(), tf[i].Alias)
		_, od, err2 := c.DownloadFile(t.Context(), of[i].Alias)
		if err1 != nil || err2 != nil || !bytes.Equal(td, od) {
			t.Errorf("%s and %s read back differently: %v %v", tf[i].Alias, of[i].Alias, err1, err2)
		}
	}
}

// TestPeerAttachmentsSideBySide: a person's message with a PDF, an image
// and a file that is gone reaches Claude from the daemon and from bhw-run
// alike: the image as an image, the PDF by its path in the same list, the
// missing file named unavailable, and one attachment_unavailable item with
// the same fields.
func TestPeerAttachmentsSideBySide(t *testing.T) {
	e, worker := newPeerE2E(t, 2)
	png, _ := base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
	pdf := []byte("%PDF-1.4\nbrief\n")
	for alias, f := range map[string][2]string{"up/brief.pdf": {string(pdf), "application/pdf"}, "up/shot.png": {string(png), "image/png"}} {
		if _, err := e.srv.Store().UploadFile(t.Context(), bhtest.SessionID, alias, []byte(f[0]), filepath.Base(alias), f[1]); err != nil {
			t.Fatal(err)
		}
	}
	send := func(alias string) {
		e.handOff(alias, claudeType, "approval", "")
		e.srv.PostAs(bhtest.PersonUserID, bhtest.SessionID, alias, blobhub.NewItem{Content: []blobhub.Block{
			{Type: "text", Text: "see attached"},
			{Type: "file", File: &blobhub.FileRef{Alias: "up/brief.pdf", Name: "brief.pdf", ContentType: "application/pdf", Size: int64(len(pdf))}},
			{Type: "file", File: &blobhub.FileRef{Alias: "up/shot.png", Name: "shot.png", ContentType: "image/png", Size: int64(len(png))}},
			{Type: "file", File: &blobhub.FileRef{Alias: "up/gone.bin", Name: "gone.bin", ContentType: "application/octet-stream", Size: 3}},
		}})
	}
	const byDaemon, byRun = "peer/att-daemon", "peer/att-run"
	e.sideBySide(worker, byDaemon, byRun, send, claudetest.Text("seen"))

	reqs := e.model.Requests()
	if len(reqs) < 2 {
		t.Fatalf("%d model requests", len(reqs))
	}
	theirs, ours := reqs[0], reqs[len(reqs)-1]
	// The daemon gives Claude each file where it sat ("[brief.pdf] at
	// <path>"); bhw-run lists them after the text, with type and size, as
	// the daemon does for an agent that takes no files (docs/files.md).
	for who, r := range map[string]claudetest.Request{"the daemon": theirs, "bhw-run": ours} {
		if !r.Contains(`"type":"image"`) || !r.Contains(base64.StdEncoding.EncodeToString(png)) {
			t.Errorf("%s's request lacks the image:\n%.1500s", who, r.Body)
		}
		if !r.Contains(filepath.Join(e.work, ".blobhub", "inbox")) || !r.Contains("brief.pdf") || !r.Contains("gone.bin — unavailable (") {
			t.Errorf("%s's request lacks the PDF's path or the missing file:\n%.1500s", who, r.Body)
		}
	}
	tu, ou := e.firstWith(byDaemon, "status", "attachment_unavailable"), e.firstWith(byRun, "status", "attachment_unavailable")
	if missing, _ := compareKeys("", tu, ou); len(missing) > 0 {
		t.Errorf("bhw-run's attachment_unavailable lacks the daemon's %v\n daemon: %v\nbhw-run: %v", missing, tu, ou)
	}
	tfs, _ := tu["files"].([]any)
	ofs, _ := ou["files"].([]any)
	if len(tfs) != 1 || len(ofs) != 1 {
		t.Fatalf("files: the daemon's %v, bhw-run's %v", tfs, ofs)
	}
	if missing, _ := compareKeys("files[0].", tfs[0].(map[string]any), ofs[0].(map[string]any)); len(missing) > 0 {
		t.Errorf("an unavailable file lacks the daemon's %v: %v vs %v", missing, tfs[0], ofs[0])
	}
}

// TestPeerFailureReasonSideBySide: a thread whose work folder is not on
// the machine fails on the daemon and on bhw-run alike: a status error
// item with the same fields and code on the thread, and failed on the
// wire.
func TestPeerFailureReasonSideBySide(t *testing.T) {
	e, worker := newPeerE2E(t, 2)
	missing := filepath.Join(e.root, "not-here")
	handOff := func(alias string) {
		e.handOff(alias, claudeType, "approval", "hello")
		o, _ := e.srv.Get(alias)
		raw, err := envelope.SetPath(o.Value, []string{"thread", "metadata", "workspace", "work_folder"}, json.RawMessage(`"`+missing+`"`))
		if err != nil {
			t.Fatal(err)
		}
		e.srv.Put(alias, string(raw))
	}
	const byDaemon, byRun = "peer/fail-daemon", "peer/fail-run"
	handOff(byDaemon)
	d := e.startDaemon(worker)
	e.waitItems(d, byDaemon, "the failure's reason", func(items []blobhub.Item) bool {
		for _, m := range agentItems(t, items) {
			if m["status"] == "error" {
				return true
			}
		}
		return false
	})
	e.stopDaemon(d)
	handOff(byRun)
	e.activate(byRun, 1, run.OutcomeFailed)

	reason := func(alias string) map[string]any {
		var found []map[string]any
		for _, m := range agentItems(t, e.items(alias)) {
			if m["status"] == "error" {
				found = append(found, m)
			}
		}
		if len(found) != 1 {
			t.Fatalf("%d status error items on %s, want 1", len(found), alias)
		}
		return found[0]
	}
	theirs, ours := reason(byDaemon), reason(byRun)
	if missing, _ := compareKeys("", theirs, ours); len(missing) > 0 {
		t.Errorf("bhw-run's reason lacks the daemon's %v\n daemon: %v\nbhw-run: %v", missing, theirs, ours)
	}
	if theirs["code"] != ours["code"] {
		t.Errorf("code: the daemon's %v, bhw-run's %v", theirs["code"], ours["code"])
	}
	t.Logf("the daemon's detail %q; bhw-run's %q", theirs["detail"], ours["detail"])
	if e.wireState(byRun) != "failed" {
		t.Errorf("bhw-run left the wire %q", e.wireState(byRun))
	}
}

// TestPeerPicksSideBySide: the same answer, the text "yes" with the pick
// "Deny" in metadata.answers, denies a parked Write on the daemon and on
// bhw-run alike: the pick wins over the text on both.
func TestPeerPicksSideBySide(t *testing.T) {
	e, worker := newPeerE2E(t, 2)
	answer := func(alias string) {
		e.srv.PostAs(bhtest.PersonUserID, bhtest.SessionID, alias, blobhub.NewItem{
			Content:  []blobhub.Block{{Type: "text", Text: "yes"}},
			Metadata: json.RawMessage(`{"answers":[{"question":"Approve?","answer":["Deny"]}]}`)})
	}
	const byDaemon, byRun = "peer/picks-daemon", "peer/picks-run"
	xd, xr := e.path("d.txt"), e.path("r.txt")

	// The daemon: the Write parks, the answer comes, the turn resumes.
	e.model.Push(writeTool(xd, "content"), claudetest.Text("OK, NOT WRITTEN"))
	e.handOff(byDaemon, claudeType, "approval", "write d.txt")
	d := e.startDaemon(worker)
	e.waitItems(d, byDaemon, "the prompt", func(items []blobhub.Item) bool { return countType(t, items, "pending_prompt") == 1 })
	answer(byDaemon)
	e.waitItems(d, byDaemon, "the resolution", func(items []blobhub.Item) bool { return countType(t, items, "pending_prompt_resolved") == 1 })
	e.stopDaemon(d)

	e.model.Push(writeTool(xr, "content"))
	e.handOff(byRun, claudeType, "approval", "write r.txt")
	e.activate(byRun, 0, run.OutcomeParked)
	answer(byRun)
	e.model.Push(claudetest.Text("OK, NOT WRITTEN"))
	e.activate(byRun, 0, run.OutcomeTurnCompleted)

	fileAbsent(t, xd)
	fileAbsent(t, xr)
	for _, alias := range []string{byDaemon, byRun} {
		res := meta(t, e.itemsOfType(alias, "pending_prompt_resolved")[0]).Prompt
		answers, _ := res["answers"].([]any)
		if len(answers) != 1 || fmt.Sprint(answers[0].(map[string]any)["answer"]) != "[Deny]" {
			t.Errorf("%s resolved with %v, want the pick Deny", alias, res)
		}
	}
	if n := countType(t, e.items(byDaemon), "approval_granted"); n != 0 {
		t.Errorf("the daemon granted the call")
	}
	if th := e.threadYAML(byRun); len(th.Grants) != 0 {
		t.Errorf("bhw-run granted the call: %v", th.Grants)
	}
}

// TestPeerHandOverInterruptedRunToDaemon: bhw-run is stopped (SIGTERM)
// in the middle of a turn, its agent running a long command; the daemon,
// started on the tree instead of the next cron pass, finishes what the
// person asked: the interrupted turn's message is not lost between the
// two (the daemon takes it up again, as after its own crash), and the
// thread ends its turn with a turn_end.
func TestPeerHandOverInterruptedRunToDaemon(t *testing.T) {
	e, worker := newPeerE2E(t, 2)
	e.Config.Policy.AllowAutonomous = true
	e.writePeerConfig(2)
	const alias = "peer/interrupted"
	marker := e.path("started.marker")
	e.model.Push(claudetest.Tool("Bash", map[string]any{"command": "touch " + marker + " && sleep 300", "description": "wait a long time"}))
	e.handOff(alias, claudeType, "autonomous", "LONG-COMMAND")
	p := e.start(bhtest.RunnerKey, nil, "--json", alias)
	waitFor(t, 2*time.Minute, "the Bash command's marker", func() bool {
		_, err := os.Stat(marker)
		return err == nil
	})
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 143 {
		t.Fatalf("exit %d after SIGTERM, want 143\n%s", code, tail(p.stderr.String(), 4000))
	}
	if th := e.threadYAML(alias); th.Turn.State != "interrupted" {
		t.Fatalf("thread.yaml's turn after SIGTERM: %+v", th.Turn)
	}

	e.model.Push(claudetest.Text("DAEMON-FINISHED"))
	d := e.startDaemon(worker)
	items := e.waitItems(d, alias, "a turn_end", func(items []blobhub.Item) bool { return countType(t, items, "turn_end") > 0 })
	e.stopDaemon(d)
	if n := countType(t, items, "turn_end"); n != 1 {
		t.Errorf("%d turn_end items, want the daemon's one: %v", n, e.itemTypes(alias))
	}
	if body := string(e.lastRequest().Body); !strings.Contains(body, "LONG-COMMAND") {
		t.Errorf("the daemon's request lacks the interrupted turn's message:\n%s", tail(body, 4000))
	}
}
