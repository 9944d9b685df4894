package run

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/envelope"
)

// BenchmarkMaterialize20: a message with 20 attachments of 256 KiB each,
// fetched over HTTP from the test hub into the inbox, as a turn's start
// does (the inbox made once, each file downloaded and written).
func BenchmarkMaterialize20(b *testing.B) {
	srv := bhtest.New(b)
	p := newBenchPublisher(b, blobhub.MaxFileBytes)
	p.a.r.Client = srv.Client(bhtest.RunnerKey)
	p.a.env = &envelope.Envelope{}
	var blocks []envelope.ContentBlock
	for i := range 20 {
		alias := fmt.Sprintf("uploads/f%02d.bin", i)
		if _, err := srv.Store().UploadFile(b.Context(), bhtest.SessionID, alias, bytes.Repeat([]byte{byte(i)}, 256<<10), filepath.Base(alias), "application/octet-stream"); err != nil {
			b.Fatal(err)
		}
		blocks = append(blocks, envelope.ContentBlock{Type: "file", File: &envelope.Attachment{Alias: alias, Name: filepath.Base(alias)}})
	}
	for b.Loop() {
		in := envelope.InboundItem{ID: "itm_bench", Content: make([]envelope.ContentBlock, len(blocks))}
		for i, bl := range blocks {
			f := *bl.File
			in.Content[i] = envelope.ContentBlock{Type: "file", File: &f}
		}
		p.a.materialize(b.Context(), []envelope.InboundItem{in})
		for _, c := range in.Content {
			if c.File.Path == "" {
				b.Fatalf("not fetched: %s", c.File.Unavailable)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(p.a.rec.t.Workspace.Folder(), defaultInbox, "itm_bench", "f19.bin")); err != nil {
		b.Fatal(err)
	}
}
