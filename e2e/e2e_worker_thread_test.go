//go:build realcli

package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/claude/claudetest"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/run"
	"github.com/blobhub/bhw-run/setup"
)

// TestE2EClaudeWorkerThread: a thread written for blobhub-worker runs on
// bhw-run as on the worker. It carries artifacts {prefix, outbox}; the
// person's message brings a PDF and an image; the agent asks to write its
// report into the outbox and the person answers in Mission Control, the
// text "Looks good, go ahead" with the pick "approve". The model gets the
// image as an image and the PDF's path; the pick approves the write; the
// report lands at prefix + its path, byte-identical; no item is over
// 64 KiB (the test hub refuses one, as BlobHub does).
func TestE2EClaudeWorkerThread(t *testing.T) {
	e := newClaudeE2E(t)
	const alias = "projects/p1/worker-thread"
	var v map[string]any
	if err := json.Unmarshal(envelope.NewThread(e.work, claudeType, setup.PermApproval, alias), &v); err != nil {
		t.Fatal(err)
	}
	v["thread"].(map[string]any)["metadata"].(map[string]any)["artifacts"] = map[string]any{"prefix": "deliverables/p1/", "outbox": ".blobhub/outbox"}
	b, _ := json.Marshal(v)
	e.srv.Put(alias, string(b))

	pdf := append([]byte("%PDF-1.4\n"), bytes.Repeat([]byte("x"), 20_000)...)
	png, _ := base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
	for alias, f := range map[string]struct {
		data []byte
		ct   string
	}{"uploads/brief.pdf": {pdf, "application/pdf"}, "uploads/shot.png": {png, "image/png"}} {
		if _, err := e.srv.Store().UploadFile(t.Context(), bhtest.SessionID, alias, f.data, filepath.Base(alias), f.ct); err != nil {
			t.Fatal(err)
		}
	}
	e.srv.PostAs(bhtest.PersonUserID, bhtest.SessionID, alias, blobhub.NewItem{Content: []blobhub.Block{
		{Type: "text", Text: "write the report from the attached brief"},
		{Type: "file", File: &blobhub.FileRef{Alias: "uploads/brief.pdf", Name: "brief.pdf", ContentType: "application/pdf", Size: int64(len(pdf))}},
		{Type: "file", File: &blobhub.FileRef{Alias: "uploads/shot.png", Name: "shot.png", ContentType: "image/png", Size: int64(len(png))}},
	}})
	report := filepath.Join(e.work, ".blobhub", "outbox", "report.md")
	e.model.Push(writeTool(report, "# Report\n"), writeTool(report, "# Report\n"), claudetest.Text("written"))
	e.activate(alias, 0, run.OutcomeParked)

	first := e.model.Requests()[0]
	if !first.Contains(`"type":"image"`) || !first.Contains(base64.StdEncoding.EncodeToString(png)) {
		t.Error("the image did not reach the model as an image")
	}
	if !first.Contains(filepath.Join(".blobhub", "inbox")) || !first.Contains("brief.pdf (application/pdf, 20009 bytes)") {
		t.Error("the model was not told where the PDF is")
	}

	e.srv.PostAs(bhtest.PersonUserID, bhtest.SessionID, alias, blobhub.NewItem{
		Content:  []blobhub.Block{{Type: "text", Text: "Looks good, go ahead"}},
		Metadata: json.RawMessage(`{"answers":[{"question":"Approve?","answer":["approve"]}]}`)})
	e.activate(alias, 0, run.OutcomeTurnCompleted)
	fileIs(t, report, "# Report\n")
	if m := e.resolved(alias); m.Decision != "approved" {
		t.Fatalf("decision %q, want approved", m.Decision)
	}
	c := e.srv.Client(bhtest.PersonKey)
	_, data, err := c.DownloadFile(t.Context(), "deliverables/p1/report.md")
	if err != nil || string(data) != "# Report\n" {
		t.Fatalf("the published report: %q %v", data, err)
	}
	for _, it := range e.items(alias) {
		if n := blobhub.EncodedSize(it); n >= blobhub.MaxItemBytes {
			t.Errorf("an item of %d bytes", n)
		}
	}
	if _, err := os.Stat(filepath.Join(e.work, ".blobhub", "inbox", ".gitignore")); err != nil {
		t.Error("the inbox does not ignore itself")
	}
	if strings.Contains(strings.Join(e.itemTypes(alias), " "), "attachment_unavailable") {
		t.Error("an attachment was unavailable")
	}
}
