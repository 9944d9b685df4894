//go:build realcli

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
)

// idleThreads is the size of the idle fleet of BenchmarkPeerIdleFleet.
const idleThreads = 100

// BenchmarkPeerIdleFleet puts the real blobhub-worker daemon next to
// bhw-run's cron recipe on one session of 100 active, idle threads
// (activated, nothing new), on one state tree, against the test hub:
//   - daemon-*: the daemon, once it has recovered every thread, over a
//     window of BHW_PEER_IDLE_WINDOW (2m unless set): the requests it made,
//     its CPU (user+system of its process group, from /proc), both scaled
//     to ten minutes, and the memory it holds (the group's VmRSS at the
//     window's end);
//   - cron-*: what one tick of the recipe does when nothing is runnable,
//     `bhw-run ls --runnable --print0` (xargs then runs nothing), as the
//     median of three: its requests and CPU times ten ticks (ten minutes of
//     a crontab's every minute), and its peak RSS (VmHWM), held only while
//     it runs.
//
// Run it alone: go test -run '^$' -bench BenchmarkPeerIdleFleet -benchtime 1x .
func BenchmarkPeerIdleFleet(b *testing.B) {
	window := 2 * time.Minute
	if v := os.Getenv("BHW_PEER_IDLE_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("BHW_PEER_IDLE_WINDOW=%s: %v", v, err)
		}
		window = d
	}
	e, worker := newPeerE2E(b, idleThreads)
	aliases := make([]string, idleThreads)
	for i := range aliases {
		aliases[i] = fmt.Sprintf("fleet/t%03d", i)
		e.handOff(aliases[i], claudeType, "approval", "") // no message: activates without a spawn
		if p := e.start(bhtest.RunnerKey, nil, "--json", aliases[i]); p.wait() != 0 {
			b.Fatalf("activation of %s: %s%s", aliases[i], p.stdout, tail(p.stderr.String(), 3000))
		}
	}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		var cronReq, cronCPU, cronRSS []float64
		for range 3 {
			e.srv.ResetCounts()
			p := e.start(bhtest.RunnerKey, nil, "ls", "--runnable", "--print0")
			stop := make(chan struct{})
			hwm := make(chan int64)
			go func() { hwm <- sampleHWM(p.cmd.Process.Pid, stop) }()
			code := p.wait()
			close(stop)
			peak := <-hwm
			if code != 0 || p.stdout.Len() != 0 {
				b.Fatalf("ls --runnable: exit %d, listed %q\n%s", code, p.stdout, tail(p.stderr.String(), 3000))
			}
			n, cmds := e.srv.Requests()
			b.Logf("a cron tick's requests: %v", countEach(cmds))
			cronReq = append(cronReq, float64(n))
			cronCPU = append(cronCPU, ms(p.cmd.ProcessState.UserTime()+p.cmd.ProcessState.SystemTime()))
			cronRSS = append(cronRSS, float64(peak)/1024)
		}

		d := e.startDaemon(worker)
		e.waitItems(d, "worker", "thread_recovered for every thread", func(items []blobhub.Item) bool {
			return countType(b, items, "thread_recovered") >= idleThreads
		})
		e.srv.ResetCounts()
		cpu0 := groupCPU(b, d.cmd.Process.Pid)
		t0 := time.Now()
		select {
		case <-time.After(window):
		case <-d.done:
			b.Fatalf("the daemon exited during the window:\n%s", tail(d.out.String(), 4000))
		}
		elapsed := time.Since(t0)
		cpu := groupCPU(b, d.cmd.Process.Pid) - cpu0
		n, cmds := e.srv.Requests()
		rss := groupRSS(b, d.cmd.Process.Pid)
		b.Logf("the daemon's requests in %s: %v", elapsed.Round(time.Second), countEach(cmds))
		e.stopDaemon(d)

		scale := float64(10*time.Minute) / float64(elapsed)
		b.ReportMetric(float64(n)*scale, "daemon-requests/10min")
		b.ReportMetric(ms(cpu)*scale, "daemon-cpu-ms/10min")
		b.ReportMetric(float64(rss)/1024, "daemon-rss-MB")
		b.ReportMetric(medianOf(cronReq)*10, "cron-requests/10min")
		b.ReportMetric(medianOf(cronCPU)*10, "cron-cpu-ms/10min")
		b.ReportMetric(medianOf(cronRSS), "cron-peak-rss-MB")
		b.ReportMetric(elapsed.Seconds(), "window-s")
	}
}

// groupProcs are the processes of the process group pgid (the daemon and
// any agent it started), read from /proc.
func groupProcs(tb testing.TB, pgid int) []string {
	tb.Helper()
	var out []string
	for _, pid := range procPIDs(tb) {
		// Fields after the command: state, ppid, pgrp, …
		if _, f, ok := procStat(pid); ok && len(f) > 2 && f[2] == strconv.Itoa(pgid) {
			out = append(out, fmt.Sprintf("/proc/%d", pid))
		}
	}
	return out
}

// procStatFields are the fields of /proc/<pid>/stat after "(comm)".
func procStatFields(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

// groupCPU is the user+system time the group's live processes have used
// (utime and stime, fields 14 and 15 of stat, in clock ticks of 10 ms).
func groupCPU(tb testing.TB, pgid int) time.Duration {
	var ticks int64
	for _, dir := range groupProcs(tb, pgid) {
		f := procStatFields(filepath.Join(dir, "stat"))
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + s
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// groupRSS is the VmRSS of the group's processes, summed, in kB.
func groupRSS(tb testing.TB, pgid int) int64 {
	var kb int64
	for _, dir := range groupProcs(tb, pgid) {
		b, err := os.ReadFile(filepath.Join(dir, "status"))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
				n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				kb += n
			}
		}
	}
	return kb
}

// countEach counts each command of cmds.
func countEach(cmds []string) map[string]int {
	m := map[string]int{}
	for _, c := range cmds {
		m[c]++
	}
	return m
}
