package run

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/setup"
)

// flood appends n person items to alias's item file of the local store in
// one write (posting them one by one fsyncs twice each), stamped a
// microsecond apart from since on, which must lie after the thread's
// cursor and n µs before now.
func flood(tb testing.TB, h *harness, alias string, n int, since time.Time) {
	tb.Helper()
	objs, _ := filepath.Glob(filepath.Join(h.srv.Dir(), "sessions", "*", "objects"))
	if len(objs) != 1 {
		tb.Fatalf("store sessions: %v", objs)
	}
	items := filepath.Join(filepath.Dir(objs[0]), "items")
	if err := os.MkdirAll(items, 0o700); err != nil {
		tb.Fatal(err)
	}
	var buf bytes.Buffer
	for i := range n {
		it := blobhub.Item{ID: fmt.Sprintf("itm_flood_%06d", i), CreatedAt: blobhub.FormatTime(since.Add(time.Duration(i) * time.Microsecond)),
			UserID: bhtest.PersonUserID, Content: []blobhub.Block{{Type: "text", Text: fmt.Sprintf("message %d of the flood", i)}}}
		b, _ := json.Marshal(it)
		buf.Write(append(b, '\n'))
	}
	f, err := os.OpenFile(filepath.Join(items, alias+".jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := f.Write(buf.Bytes()); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
}

// peakRSS runs one activation of alias in a subprocess (maybeRunActivation)
// and returns its peak resident set, in MiB, and its exit code.
func peakRSS(tb testing.TB, h *harness, alias string) (float64, int) {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	hwm := filepath.Join(tb.TempDir(), "hwm")
	spec, _ := json.Marshal(activationSpec{State: h.state, Config: h.config, Store: h.srv.Dir(), Alias: alias, HWMFile: hwm})
	cmd := exec.Command(exe, "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), activationEnv+"="+string(spec))
	_ = cmd.Run()
	b, err := os.ReadFile(hwm)
	var kb float64
	if _, serr := fmt.Sscanf(string(b), "%f kB", &kb); err != nil || serr != nil {
		tb.Fatalf("the subprocess's peak RSS: %q %v %v", b, err, serr)
	}
	return kb / 1024, cmd.ProcessState.ExitCode()
}

// BenchmarkIdleTick measures the run of an active thread with nothing new
// to do, on the local store, in-process (ns/op, B/op) and, once, as a
// process of its own (peak_rss_mb): after a flood of 20,000 person items
// has been answered, and with a 50 MB envelope. Both used to cost every
// idle tick hundreds of MiB.
func BenchmarkIdleTick(b *testing.B) {
	quiet := func(r *Runner) { r.Logger = slog.New(slog.DiscardHandler) }
	idle := func(b *testing.B, h *harness, alias string) {
		rss, code := peakRSS(b, h, alias)
		if code != 0 {
			b.Fatalf("the idle run in a process of its own: exit %d", code)
		}
		fi, err := os.Stat(filepath.Join(setup.ThreadDir(h.setup().JobDir, alias), "thread.yaml"))
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if sum := h.run(alias); sum.Outcome != OutcomeIdle || sum.ExitCode != 0 {
				b.Fatalf("idle tick: outcome %q exit %d %+v", sum.Outcome, sum.ExitCode, sum.Error)
			}
		}
		b.StopTimer()
		b.ReportMetric(rss, "peak_rss_mb")
		b.ReportMetric(float64(fi.Size())/1024, "thread_yaml_kb")
	}
	b.Run("after_20000_item_flood", func(b *testing.B) {
		h := newHarness(b, true)
		h.tune = quiet
		const alias = "flood"
		since := time.Now().Add(-time.Minute)
		h.handOff(alias, "approval", "")
		want(b, h.run(alias), OutcomeIdle, 0)
		flood(b, h, alias, 20000, since)
		turns := 0
		for ; ; turns++ {
			h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "ok"}}}})
			sum := h.run(alias)
			if sum.Outcome == OutcomeIdle {
				break
			}
			if sum.Outcome != OutcomeTurnCompleted || turns > 100 {
				b.Fatalf("answering the flood: outcome %q exit %d %+v after %d turns", sum.Outcome, sum.ExitCode, sum.Error, turns)
			}
		}
		idle(b, h, alias)
		b.ReportMetric(float64(turns), "turns")
	})
	b.Run("50MB_envelope", func(b *testing.B) {
		h := newHarness(b, true)
		h.tune = quiet
		const alias = "big"
		h.handOff(alias, "approval", "")
		want(b, h.run(alias), OutcomeIdle, 0)
		big := envelopeWith(h.work, func(md map[string]any) {
			md["instance"] = map[string]any{"state": "active"}
			md["notes"] = strings.Repeat("x", 50<<20)
		})
		h.srv.Put(alias, big)
		idle(b, h, alias)
	})
}
