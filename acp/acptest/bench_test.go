//go:build realcli

package acptest

import (
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// BenchmarkAgent measures each agent's own cost for one activation with a
// one-tool turn, against the fakes: spawn → initialize, session/new, the
// prompt → the first item (a tool call, text or a question), the whole turn (a write allowed once),
// stdin closed → exit; CPU (user+sys of the agent and the children it
// reaped) and the peak summed RSS of its processes. These are the numbers
// the ACP adapter's own overhead is to be set against.
//
//	go test -tags realcli ./acp/acptest -run '^$' -bench Agent -benchtime 5x
func BenchmarkAgent(b *testing.B) {
	for _, r := range recipes {
		b.Run(r.Type, func(b *testing.B) { benchAgent(b, r) })
	}
}

func benchAgent(b *testing.B, r *recipe) {
	var initD, newD, firstD, turnD, exitD, cpu time.Duration
	var peak int
	for i := 0; i < b.N; i++ {
		m := oneActivation(b, r)
		initD += m.init
		newD += m.new
		firstD += m.first
		turnD += m.turn
		exitD += m.exit
		cpu += m.cpu
		peak = max(peak, m.peakKiB)
	}
	n := time.Duration(b.N)
	b.ReportMetric(float64((initD / n).Milliseconds()), "init-ms")
	b.ReportMetric(float64((newD / n).Milliseconds()), "new-ms")
	b.ReportMetric(float64((firstD / n).Milliseconds()), "first-item-ms")
	b.ReportMetric(float64((turnD / n).Milliseconds()), "turn-ms")
	b.ReportMetric(float64((exitD / n).Milliseconds()), "exit-ms")
	b.ReportMetric(float64((cpu / n).Milliseconds()), "cpu-ms")
	b.ReportMetric(float64(peak)/1024, "peak-rss-MiB")
}

type measured struct {
	init, new, first, turn, exit, cpu time.Duration
	peakKiB                           int
}

func oneActivation(b *testing.B, r *recipe) measured {
	g := newRig(b, r)
	var m measured
	t0 := time.Now()
	a := g.start()
	stopSampling := sampleRSS(a, &m.peakKiB)
	a.initialize(b)
	m.init = time.Since(t0)
	t1 := time.Now()
	sid := a.newSession(b, g.h.work)
	m.new = time.Since(t1)
	a.drain()
	t2 := time.Now()
	pc := a.prompt(sid, Marker(r.WriteTool, r.WriteArgs(filepath.Join(g.h.work, "b.txt"), "bench\n")))
	first, _ := a.next(isItem, stepWait)
	m.first = time.Since(t2)
	perm := first
	if !isPermission(first) {
		perm, _ = a.next(isPermission, stepWait)
	}
	a.choose(perm, parsePermission(b, perm).option(b, "allow_once"))
	res, _ := a.collectUntil(pc, stepWait)
	m.turn = time.Since(t2)
	if stopReason(b, res) != "end_turn" {
		b.Fatalf("turn %s", res)
	}
	t3 := time.Now()
	a.closeStdin()
	a.waitExit(exitWait)
	m.exit = time.Since(t3)
	stopSampling()
	m.cpu = a.procStat.UserTime() + a.procStat.SystemTime()
	return m
}

// isItem: the first thing of a turn a person would see (a relayed item or a
// question), not bookkeeping such as available_commands_update.
func isItem(m *rpcMsg) bool {
	if isPermission(m) {
		return true
	}
	switch k, u := m.update(); k {
	case "tool_call", "agent_thought_chunk":
		return true
	case "agent_message_chunk":
		c, _ := u["content"].(map[string]any)
		s, _ := c["text"].(string)
		return s != ""
	}
	return false
}

// sampleRSS records the peak summed RSS of the agent's processes every
// 20 ms until stopped.
func sampleRSS(a *agentProc, peak *int) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if kib := rssKiB(a.tag); kib > *peak {
				*peak = kib
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}
