package run

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/setup"
)

// benchPublisher is one activation of a thread with an outbox, wired to a
// sinkClient: what publishing the outbox after a completed turn costs
// bhw-run itself, without a server in the same process.
type benchPublisher struct {
	a      *activation
	outbox string
	sink   *sinkClient
}

func newBenchPublisher(b *testing.B, maxBytes int64) *benchPublisher {
	b.Helper()
	state, work := b.TempDir(), b.TempDir()
	sink := &sinkClient{}
	s := &setup.Setup{StateDir: state, JobDir: filepath.Join(state, "jobs", "bench")}
	s.Config.Artifacts.MaxBytes = maxBytes
	r := &Runner{Setup: s, Client: sink, Logger: slog.New(slog.DiscardHandler)}
	const alias = "bench/t"
	dir := setup.ThreadDir(s.JobDir, alias)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	j, err := openJournal(filepath.Join(dir, "emissions.jsonl"), "n0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = j.closeFile() })
	tlog, err := os.Create(filepath.Join(dir, "thread.log"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = tlog.Close() })
	th := &envelope.Thread{Alias: alias, EmissionNonce: "n0"}
	th.Workspace.WorkFolder = work
	a := &activation{r: r, alias: alias, dir: dir, log: r.Logger, report: report{sum: &Summary{Alias: alias}}, rec: &record{dir: dir, alias: alias, log: r.Logger, t: th, j: j}, tlog: &threadLog{file: tlog, Log: agent.NewLog(tlog)},
		env: &envelope.Envelope{Artifacts: &envelope.Artifacts{Source: artifactsSource}}}
	a.usePoster()
	p := &benchPublisher{a: a, outbox: filepath.Join(work, artifactsSource), sink: sink}
	if err := os.MkdirAll(p.outbox, 0o755); err != nil {
		b.Fatal(err)
	}
	return p
}

// files writes n files of size bytes (each different) into the outbox.
func (p *benchPublisher) files(b *testing.B, n, size int) {
	b.Helper()
	for i := range n {
		data := bytes.Repeat([]byte{byte('a' + i%26)}, size)
		copy(data, fmt.Sprintf("file %d\n", i))
		if err := os.WriteFile(filepath.Join(p.outbox, fmt.Sprintf("f%03d.txt", i)), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// publishOutbox is what a completed turn does with its outbox: scan,
// journal the intents, upload and announce each; then forget the
// published record so the next iteration publishes the same files again.
func (p *benchPublisher) publishOutbox(b *testing.B) {
	files := p.a.scanOutbox()
	p.a.rec.mu.Lock()
	intents, err := p.a.journalIntents(files, nil)
	p.a.rec.mu.Unlock()
	if err != nil {
		b.Fatal(err)
	}
	if err := p.a.publishArtifacts(b.Context(), intents); err != nil {
		b.Fatal(err)
	}
	p.a.poster.flushNotMine(b.Context())
	if n := len(p.a.rec.published); n != len(files) || n == 0 {
		b.Fatalf("published %d of %d files", n, len(files))
	}
	p.a.rec.published = map[string]envelope.PublishedArtifact{}
}

// sinkClient answers uploads and posts without keeping them; Download
// finds nothing. With measure set, every upload records the live heap
// (after a collection): what the run holds while that upload is sent.
type sinkClient struct {
	blobhub.Client
	measure  bool
	mu       sync.Mutex
	peakLive uint64
	posts    int
}

func (c *sinkClient) Download(context.Context, string) (blobhub.Object, error) {
	return blobhub.Object{}, blobhub.ErrNotFound
}

func (c *sinkClient) Upload(_ context.Context, _ string, v json.RawMessage) error {
	c.notePeak()
	runtime.KeepAlive(v)
	return nil
}

// notePeak records the live heap after a collection, when measure is set,
// and keeps the largest seen in peakLive.
func (c *sinkClient) notePeak() {
	if !c.measure {
		return
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	c.mu.Lock()
	c.peakLive = max(c.peakLive, ms.HeapAlloc)
	c.mu.Unlock()
}

func (c *sinkClient) Post(context.Context, string, blobhub.NewItem) (blobhub.Item, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.posts++
	return blobhub.Item{ID: fmt.Sprintf("itm_bench_%d", c.posts), CreatedAt: now()}, nil
}

// BenchmarkPublishOutbox40x5MB publishes an outbox of 40 files of 5 MB.
// peak_live_MiB is the most the heap held while an upload was sent: one
// file's bytes and their encoded value, whatever the number of files.
func BenchmarkPublishOutbox40x5MB(b *testing.B) {
	const size = 5 << 20
	p := newBenchPublisher(b, size)
	p.files(b, 40, size)
	p.sink.measure = true
	for b.Loop() {
		p.publishOutbox(b)
	}
	b.ReportMetric(float64(p.sink.peakLive)/(1<<20), "peak_live_MiB")
}

// BenchmarkPublishNotMine publishes 100 small files with not_mine.yaml
// already caching 5,000 aliases: the cache is written once per run, not
// once per file.
func BenchmarkPublishNotMine(b *testing.B) {
	for _, cached := range []int{0, 5000} {
		b.Run(fmt.Sprintf("cached=%d", cached), func(b *testing.B) {
			p := newBenchPublisher(b, 5<<20)
			reasons := map[string]string{}
			for i := range cached {
				reasons[fmt.Sprintf("other/thread-%05d/artifacts/report.md", i)] = setup.ReasonArtifact
			}
			if err := setup.AddNotMines(b.Context(), p.a.r.Setup.JobDir, reasons); err != nil {
				b.Fatal(err)
			}
			p.files(b, 100, 1024)
			for b.Loop() {
				p.publishOutbox(b)
			}
		})
	}
}
