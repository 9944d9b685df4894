package e2e

// What a run costs on threads that have lived long: a person keeps talking
// to the same thread for weeks, and a cron tick on day 300 must cost what
// it costs on day 1. Every history here is made by bhw-run itself: turns of
// the fake Claude agent relayed through the built binary into the local
// store, so thread.yaml, the journal and the store's files are exactly what
// bhw-run writes.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/claude/claudetest"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/run"
	"github.com/blobhub/bhw-run/setup"
)

// historyEnv is an e2e env whose Claude agent is the fake relaying one turn
// of turnItems texts of textBytes bytes each (autonomous: nothing is asked).
// On shm the store lives on tmpfs when there is one: the local store fsyncs
// every item it appends, which on a disk alone makes a history of 100,000
// items take minutes.
func historyEnv(b *testing.B, shm bool, turnItems, textBytes int) *e2eEnv {
	b.Helper()
	e := newE2E(b)
	if st, err := os.Stat("/dev/shm"); shm && err == nil && st.IsDir() {
		dir, err := os.MkdirTemp("/dev/shm", "bhw-history-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
		e.srv = bhtest.New(b, bhtest.WithDir(dir))
	}
	steps := make([]claudetest.FakeStep, turnItems)
	for i := range steps {
		head := fmt.Sprintf("step %d: ", i)
		steps[i] = claudetest.FakeStep{Text: head + strings.Repeat("x", max(textBytes-len(head), 1))}
	}
	e.Config.Policy.AllowAutonomous = true
	e.fakeClaude(steps)
	return e
}

// growHistory hands alias off (with an outbox) and runs turns until bhw-run
// has posted at least items of its own; 0 is a thread activated and never
// spoken to. Before every turn after the first the "agent" leaves five new
// files in the outbox, so the history holds published artifacts too. The
// runs talk to the store as file:// (no HTTP): building is the slow part.
func (e *e2eEnv) growHistory(b *testing.B, alias string, items int) (turns int) {
	b.Helper()
	work := filepath.Join(e.root, "work-"+strings.ReplaceAll(alias, "/", "-"))
	if err := os.MkdirAll(work, 0o700); err != nil {
		b.Fatal(err)
	}
	var v map[string]any
	_ = json.Unmarshal(envelope.NewThread(work, claudeType, "autonomous", alias), &v)
	v["thread"].(map[string]any)["metadata"].(map[string]any)["artifacts"] = map[string]any{"source": ".bhw/outbox"}
	raw, _ := json.Marshal(v)
	e.srv.Put(alias, string(raw))
	e.local = true
	defer func() { e.local = false }()
	posted := 0
	for first := true; first || posted < items; first = false {
		if items > 0 {
			if !first {
				for i := range 5 {
					name := filepath.Join(work, ".bhw", "outbox", fmt.Sprintf("turn-%03d-%d.md", turns, i))
					if err := os.WriteFile(name, []byte(fmt.Sprintf("# report %d of turn %d\n", i, turns)), 0o600); err != nil {
						b.Fatal(err)
					}
				}
			}
			e.srv.PersonPost(alias, fmt.Sprintf("message %d", turns))
		}
		p := e.start(bhtest.RunnerKey, nil, "-q", "--json", alias)
		code := p.wait()
		s := parseSummary(b, p.stdout.String())
		if want := run.OutcomeTurnCompleted; code != 0 || items > 0 && s.Outcome != want {
			b.Fatalf("history of %s, turn %d: exit %d outcome %q\n%s", alias, turns, code, s.Outcome, tail(p.stderr.String(), 3000))
		}
		posted += s.ItemsPosted
		turns++
	}
	return turns
}

// idleRun is one idle run of alias over HTTP: its wall time, its own CPU
// (an idle run starts no child) and peak RSS (kB), bhw-run's VmHWM sampled
// while it runs (sampleHWM): wait4's maxrss would count the test
// process's own pages, which the child shares between fork and exec.
func (e *e2eEnv) idleRun(b *testing.B, alias string) (wall, cpu time.Duration, rssKB int64) {
	b.Helper()
	start := time.Now()
	p := e.start(bhtest.RunnerKey, nil, "-q", "--json", alias)
	hwm := make(chan int64)
	stop := make(chan struct{})
	go func() { hwm <- sampleHWM(p.cmd.Process.Pid, stop) }()
	code := p.wait()
	wall = time.Since(start)
	close(stop)
	rssKB = <-hwm
	if s := parseSummary(b, p.stdout.String()); code != 0 || s.Outcome != run.OutcomeIdle {
		b.Fatalf("idle run of %s: exit %d outcome %q\n%s", alias, code, s.Outcome, tail(p.stderr.String(), 3000))
	}
	return wall, p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime(), rssKB
}

func fileKB(b *testing.B, path string) float64 {
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return float64(st.Size()) / 1024
}

// BenchmarkIdleHistory measures the idle run (an active thread, nothing
// new: two requests) of three threads of one state tree against the
// loopback BlobHub: one activated and never spoken to, one with 20,000 and
// one with 100,000 items of its own history (turns of 5,000 texts of 1 KB,
// five artifacts published per turn), made by bhw-run as described above.
// Each iteration (b.Loop: the history is built once) runs each thread
// once, in turn, so drift on a shared machine hits all three alike. It
// reports the median wall time and the median peak RSS of each, their ratio
// (wall) and difference (RSS) to the fresh thread, each one's own CPU (less
// sensitive than the wall to a loaded machine), and the sizes of the
// longest thread's thread.yaml and emissions.jsonl. Targets: ≤ 1.2× wall
// and ≤ +2 MB RSS at 100,000 items.
func BenchmarkIdleHistory(b *testing.B) {
	e := historyEnv(b, true, 5000, 1024)
	threads := []struct {
		name  string
		items int
	}{{"h0", 0}, {"h20k", 20000}, {"h100k", 100000}}
	start := time.Now()
	for _, th := range threads {
		turns := e.growHistory(b, "bench/"+th.name, th.items)
		b.Logf("%s: %d items of history in %d runs (%s so far)", th.name, th.items, turns, time.Since(start).Round(time.Second))
	}
	e.srv.ResetCounts()
	e.idleRun(b, "bench/h100k")
	if n, cmds := e.srv.Requests(); n != 2 {
		b.Fatalf("the idle run made %d requests %v, want 2", n, cmds)
	}
	walls := make([][]time.Duration, len(threads))
	cpus := make([][]time.Duration, len(threads))
	rss := make([][]float64, len(threads))
	for b.Loop() {
		for k, th := range threads {
			w, c, r := e.idleRun(b, "bench/"+th.name)
			walls[k] = append(walls[k], w)
			cpus[k] = append(cpus[k], c)
			rss[k] = append(rss[k], float64(r)/1024)
		}
	}
	w0, r0 := median(walls[0]), medianOf(rss[0])
	for k, th := range threads {
		w, r := median(walls[k]), medianOf(rss[k])
		b.ReportMetric(float64(w.Microseconds())/1000, th.name+"_idle_ms")
		b.ReportMetric(float64(median(cpus[k]).Microseconds())/1000, th.name+"_cpu_ms")
		b.ReportMetric(r, th.name+"_rss_mb")
		if k > 0 {
			b.ReportMetric(float64(w)/float64(w0), th.name+"_wall_x")
			b.ReportMetric(r-r0, th.name+"_rss_+mb")
		}
	}
	dir := setup.ThreadDir(e.jobDir(), "bench/h100k")
	b.ReportMetric(fileKB(b, filepath.Join(dir, "thread.yaml")), "h100k_thread_yaml_kb")
	b.ReportMetric(fileKB(b, filepath.Join(dir, "emissions.jsonl")), "h100k_journal_kb")
}

// lsFleet is one state tree and store with 1,000 active, idle threads
// lsh/t0000 … lsh/t0999; the first withHistory of them hold 5,000 items of
// history each.
//
// Two threads are made by bhw-run for real: an activated one that was never
// spoken to, and one with one turn of 5,000 texts of 200 bytes. Every other
// thread is a copy of one of them, as bulk as it can be while staying what
// bhw-run wrote: the envelope uploaded again under the new alias, the
// store's items file hard-linked (ls only reads it), thread.yaml loaded and
// written back with the new alias, and the journal copied with its targets
// renamed (the aliases have the same length, so every other byte stays).
// Relaying a million items one post at a time would take many minutes.
func lsFleet(b *testing.B, withHistory int) *e2eEnv {
	b.Helper()
	e := historyEnv(b, false, 5000, 200)
	// Every pass a full listing, which reads every thread's history: what
	// this measures (an idle pass from the feed reads none, see
	// bench_feed_test.go).
	e.Config.Discovery.FullListingEvery = "0s"
	e.writeConfig()
	alias := func(i int) string { return fmt.Sprintf("lsh/t%04d", i) }
	idle := alias(withHistory) // the template of the threads without history
	e.growHistory(b, idle, 0)
	if withHistory > 0 {
		e.growHistory(b, alias(0), 5000)
	}
	for i := range 1000 {
		switch {
		case i == 0 && withHistory > 0, i == withHistory:
			continue
		case i < withHistory:
			e.cloneThread(b, alias(0), alias(i))
		default:
			e.cloneThread(b, idle, alias(i))
		}
	}
	return e
}

// cloneThread makes thread to a copy of thread from (see lsFleet).
func (e *e2eEnv) cloneThread(b *testing.B, from, to string) {
	b.Helper()
	obj, ok := e.srv.Get(from)
	if !ok {
		b.Fatalf("no thread %s", from)
	}
	e.srv.Put(to, string(obj.Value))
	src, err := e.srv.Store().ItemsFile(bhtest.SessionID, from)
	if err != nil {
		b.Fatal(err)
	}
	dst, err := e.srv.Store().ItemsFile(bhtest.SessionID, to)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.Link(src, dst); err != nil && !os.IsNotExist(err) {
		b.Fatal(err)
	}
	fromDir, toDir := setup.ThreadDir(e.jobDir(), from), setup.ThreadDir(e.jobDir(), to)
	if err := os.MkdirAll(toDir, 0o700); err != nil {
		b.Fatal(err)
	}
	th, err := envelope.LoadThread(filepath.Join(fromDir, "thread.yaml"))
	if err != nil || th == nil {
		b.Fatalf("thread.yaml of %s: %v", from, err)
	}
	th.Alias = to
	y, err := yaml.Marshal(th)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(toDir, "thread.yaml"), y, 0o600); err != nil {
		b.Fatal(err)
	}
	j, err := os.ReadFile(filepath.Join(fromDir, "emissions.jsonl"))
	if err != nil && !os.IsNotExist(err) {
		b.Fatal(err)
	}
	j = bytes.ReplaceAll(j, []byte(`"target":"`+from+`"`), []byte(`"target":"`+to+`"`))
	if err := os.WriteFile(filepath.Join(toDir, "emissions.jsonl"), j, 0o600); err != nil {
		b.Fatal(err)
	}
}

// lsOnce runs `bhw-run ls --runnable` over HTTP: its wall time, its own
// CPU (ls starts no child) and the requests it made. Nothing is runnable in
// a fleet.
func (e *e2eEnv) lsOnce(b *testing.B) (wall, cpu time.Duration, requests int) {
	b.Helper()
	printed, wall, cpu, requests := e.lsPass(b)
	if len(printed) > 0 {
		b.Fatalf("ls --runnable listed %q", printed)
	}
	return wall, cpu, requests
}

// BenchmarkListHistory measures `bhw-run ls --runnable` over 1,000 active,
// idle threads against the loopback BlobHub, once with no history anywhere
// and once with 200 of them holding 5,000 items each (lsFleet), the two
// fleets listed in turn. It reports each one's median wall time (the
// loopback hub's work included), ls's own CPU and the requests, and the
// ratio of the walls. Targets: ≤ 1.2×, requests unchanged.
func BenchmarkListHistory(b *testing.B) {
	start := time.Now()
	fresh, grown := lsFleet(b, 0), lsFleet(b, 200)
	b.Logf("two fleets of 1,000 threads built in %s", time.Since(start).Round(time.Second))
	var wf, wg, cf, cg []time.Duration
	var nf, ng []float64
	for b.Loop() {
		w, c, n := fresh.lsOnce(b)
		wf, cf, nf = append(wf, w), append(cf, c), append(nf, float64(n))
		w, c, n = grown.lsOnce(b)
		wg, cg, ng = append(wg, w), append(cg, c), append(ng, float64(n))
	}
	b.ReportMetric(float64(median(wf).Microseconds())/1000, "no_history_ms")
	b.ReportMetric(float64(median(wg).Microseconds())/1000, "history_ms")
	b.ReportMetric(float64(median(wg))/float64(median(wf)), "wall_x")
	b.ReportMetric(float64(median(cf).Microseconds())/1000, "no_history_cpu_ms")
	b.ReportMetric(float64(median(cg).Microseconds())/1000, "history_cpu_ms")
	b.ReportMetric(medianOf(nf), "no_history_requests")
	b.ReportMetric(medianOf(ng), "history_requests")
	if !slices.Equal(nf[:1], ng[:1]) {
		b.Errorf("requests differ: %v without history, %v with", nf[0], ng[0])
	}
}
