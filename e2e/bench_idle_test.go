//go:build realcli

package e2e

import (
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/blobhub/bhtest"
)

// BenchmarkIdleRun measures the idle run (an active thread, nothing new)
// against a loopback BlobHub: bhw-run's wall time and peak RSS next to two
// curl requests to the same server (the two requests an idle run makes),
// as medians and their ratio. Targets (issue 2): ratio ≤ 2, RSS ≤ 30 MB.
func BenchmarkIdleRun(b *testing.B) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		b.Fatal("curl is needed for the comparison: apt-get install curl")
	}
	e := newE2E(b)
	const alias = "bench/idle"
	e.handOff(alias, "claude_code", "approval", "") // no message: activates without spawning
	// The checklist resolves the executable even when nothing spawns.
	e.agentConfig(claudeType).Executable = claudeBin(b)
	e.writeConfig()
	if code, out, _ := e.run("--json", alias); code != 0 {
		b.Fatalf("activation: exit %d %s", code, out)
	}
	e.srv.ResetCounts()
	if code, out, _ := e.run("--json", alias); code != 0 {
		b.Fatalf("idle run: exit %d %s", code, out)
	}
	if n, cmds := e.srv.Requests(); n != 2 {
		b.Fatalf("the idle run made %d requests %v, want 2", n, cmds)
	}

	body := func(cmd string, extra string) string {
		return fmt.Sprintf(`{"command":%q,"session_id":%q,"alias":%q%s}`, cmd, bhtest.SessionID, alias, extra)
	}
	url := e.srv.URL() + "/revisions/" + bhtest.RevisionID + "/data/query" // both reads
	curlOnce := func(data string) {
		c := exec.Command(curl, "-sS", "-o", "/dev/null", "-X", "POST", "-H", "X-API-Key: "+bhtest.RunnerKey,
			"-H", "Content-Type: application/json", "--data", data, url)
		if out, err := c.CombinedOutput(); err != nil {
			b.Fatalf("curl: %v %s", err, out)
		}
	}
	var runs, curls []time.Duration
	var rssKB int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		p := e.start(bhtest.RunnerKey, nil, alias)
		if code := p.wait(); code != 0 {
			b.Fatalf("idle run: exit %d", code)
		}
		runs = append(runs, time.Since(t0))
		t0 = time.Now()
		curlOnce(body("download_session_object", ""))
		curlOnce(body("list_session_thread_items", `,"ascending":true`))
		curls = append(curls, time.Since(t0))
	}
	b.StopTimer()
	// Peak RSS is bhw-run's VmHWM, sampled while it runs, in runs of their
	// own (the sampling would slow the timed ones): wait4's maxrss of a
	// child started by a fork that shares the parent's memory until exec
	// (os/exec's) counts the parent's resident set at the exec, here the
	// test binary's.
	for range b.N {
		p := e.start(bhtest.RunnerKey, nil, alias)
		stop, hwm := make(chan struct{}), make(chan int64)
		go func() { hwm <- sampleHWM(p.cmd.Process.Pid, stop) }()
		code := p.wait()
		close(stop)
		rssKB = max(rssKB, <-hwm)
		if code != 0 {
			b.Fatalf("idle run: exit %d", code)
		}
	}
	mr, mc := median(runs), median(curls)
	b.ReportMetric(float64(mr.Microseconds())/1000, "idle_ms")
	b.ReportMetric(float64(mc.Microseconds())/1000, "two_curls_ms")
	b.ReportMetric(float64(mr)/float64(mc), "ratio")
	b.ReportMetric(float64(rssKB)/1024, "peak_rss_mb")
}
