package run

import (
	"context"
	"runtime"

	"testing"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/envelope"
)

// UploadFile answers a session file's upload without keeping it; with
// measure set it records the live heap first, as Upload does.
func (c *sinkClient) UploadFile(_ context.Context, _ string, data []byte, name, ct string) (blobhub.FileInfo, error) {
	c.notePeak()
	runtime.KeepAlive(data)
	return blobhub.FileInfo{Name: name, ContentType: ct, Size: int64(len(data))}, nil
}

// benchWorkerPublish publishes an outbox of n files of size bytes in
// blobhub-worker's form, as a turn's end does: the intent journaled, every
// file uploaded, the items journaled and posted. peak_live_MiB is the most
// the heap held while a file was uploaded.
func benchWorkerPublish(b *testing.B, n, size int) {
	p := newBenchPublisher(b, blobhub.MaxFileBytes)
	p.a.env.Artifacts = &envelope.Artifacts{Prefix: "bench/out/", Outbox: artifactsSource}
	p.files(b, n, size)
	p.sink.measure = size >= 1<<20
	for b.Loop() {
		p.a.rec.mu.Lock()
		intent, err := p.a.journalPublish()
		p.a.rec.mu.Unlock()
		if err != nil {
			b.Fatal(err)
		}
		items := p.a.publishOutbox(b.Context(), intent)
		p.a.rec.mu.Lock()
		es, err := p.a.journalPublished(items)
		if err == nil {
			err = p.a.closePublish(intent)
		}
		p.a.rec.mu.Unlock()
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range es {
			p.a.poster.post(b.Context(), e)
		}
		if got := len(es); got != (n+publishBlocksPerItem-1)/publishBlocksPerItem {
			b.Fatalf("%d items for %d files", got, n)
		}
	}
	if p.sink.measure {
		b.ReportMetric(float64(p.sink.peakLive)/(1<<20), "peak_live_MiB")
	}
}

// BenchmarkPublishWorker100x64KiB: 100 files of 64 KiB.
func BenchmarkPublishWorker100x64KiB(b *testing.B) { benchWorkerPublish(b, 100, 64<<10) }

// BenchmarkPublishWorker10x4MiB: ten files of 4 MiB: the heap holds about
// one file, not ten.
func BenchmarkPublishWorker10x4MiB(b *testing.B) { benchWorkerPublish(b, 10, 4<<20) }
