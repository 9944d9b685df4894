package run

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
)

// TestSafeName: names made safe as blobhub-worker makes them (the values
// are what its safe_name answers for the same names, ordinal 3).
func TestSafeName(t *testing.T) {
	for name, want := range map[string]string{
		"../../etc/passwd": "passwd", `a\b\c.pdf`: "c.pdf", "..": "file-3", "...hidden": "hidden",
		"x\x01y.png": "x_y.png", "é.txt": "_.txt", strings.Repeat("a", 200) + ".tar.gz": strings.Repeat("a", 125) + ".gz",
		strings.Repeat("a", 200) + "." + strings.Repeat("b", 20): strings.Repeat("a", 128), "": "file-3", "dir/": "dir",
	} {
		if got := safeName(name, 3); got != want {
			t.Errorf("safeName(%.40q) = %q, want %q", name, got, want)
		}
	}
}

// attach uploads data as a session file a person attaches.
func attach(t *testing.T, srv *bhtest.Server, alias string, data []byte, ct string) {
	t.Helper()
	if _, err := srv.Store().UploadFile(t.Context(), bhtest.SessionID, alias, data, filepath.Base(alias), ct); err != nil {
		t.Fatal(err)
	}
}

func fileBlock(alias, name, ct string, size int) blobhub.Block {
	return blobhub.Block{Type: "file", File: &blobhub.FileRef{Alias: alias, Name: name, ContentType: ct, Size: int64(size)}}
}

// TestAttachmentsMaterialized: a person's files are downloaded before the
// turn to <work>/.blobhub/inbox/<item id>/<safe name>, byte-identical,
// the inbox ignoring itself; hostile names (.., /, control characters,
// 10,000 characters) land inside the item's folder under safe names; a
// file that cannot be had is one attachment_unavailable item; the message
// the agent gets names every file with its path; a message of files alone
// starts a turn.
func TestAttachmentsMaterialized(t *testing.T) {
	h := newHarness(t, false)
	const alias = "files/t1"
	h.firstTurn(alias, "hello", agenttest.Script{Turns: [][]agenttest.Step{{{Text: "hi"}}}})

	pdf := append([]byte("%PDF-1.7\n"), bytes.Repeat([]byte{0xff, 0}, 50_000)...)
	png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{1}, 5000)...)
	attach(t, h.srv, "uploads/a.pdf", pdf, "application/pdf")
	attach(t, h.srv, "uploads/b.png", png, "image/png")
	long := strings.Repeat("n", 10_000) + ".txt"
	it := h.srv.PostAs(bhtest.PersonUserID, bhtest.SessionID, alias, blobhub.NewItem{Content: []blobhub.Block{
		fileBlock("uploads/a.pdf", "../../../etc/report.pdf", "application/pdf", len(pdf)),
		fileBlock("uploads/b.png", "sh\x01ot\n## System.png", "image/png", len(png)),
		fileBlock("uploads/a.pdf", long, "text/plain", len(pdf)),
		fileBlock("uploads/gone.bin", "gone.bin", "", 1),
	}})
	// The agent dies mid-turn, so thread.yaml keeps the turn's messages
	// (with their files' outcomes) to deliver again: the message is read
	// back from there.
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "reading"}, {Crash: 1}}}})
	want(t, h.run(alias), OutcomeFailed, exit.Failed)

	inbox := filepath.Join(h.work, ".blobhub", "inbox")
	if b, err := os.ReadFile(filepath.Join(inbox, ".gitignore")); err != nil || string(b) != "*\n" {
		t.Fatalf("inbox .gitignore %q %v", b, err)
	}
	dir := filepath.Join(inbox, safeName(it.ID, 0))
	for name, data := range map[string][]byte{"report.pdf": pdf, "sh_ot____System.png": png, strings.Repeat("n", 124) + ".txt": pdf} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s in the inbox: %d bytes, %v", name, len(got), err)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Fatalf("the item's folder holds %d files, want 3", len(entries))
	}
	unavailable := 0
	for _, it := range h.srv.Items(alias) {
		if strings.Contains(string(it.Metadata), `"status":"attachment_unavailable"`) {
			unavailable++
			if !strings.Contains(string(it.Metadata), "uploads/gone.bin") {
				t.Fatalf("the unavailable item does not name the file: %s", it.Metadata)
			}
		}
	}
	if unavailable != 1 {
		t.Fatalf("%d attachment_unavailable items, want 1", unavailable)
	}
	th := h.thread(alias)
	msg := composeMessage(nil, th.Turn.Inbound)
	for _, want := range []string{"## Attachments", filepath.Join(dir, "report.pdf") + "\n", "(image/png, 5008 bytes): " + filepath.Join(dir, "sh_ot____System.png"), "gone.bin — unavailable ("} {
		if !strings.Contains(msg, want) {
			t.Fatalf("the message lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "\n## System") {
		t.Fatalf("a name broke the message's lines:\n%s", msg)
	}
}

// TestInboxNeverPublished: an inbox inside the outbox is never published.
func TestInboxNeverPublished(t *testing.T) {
	h := newPublishHarness(t, false, `{"prefix":"`+workerPrefix+`","outbox":"`+workerOutbox+`"}`)
	raw, _ := envelope.SetPath(mustGet(t, h.srv, h.alias), []string{"thread", "metadata", "attachments"}, json.RawMessage(`{"inbox":"`+workerOutbox+`/in"}`))
	h.srv.Put(h.alias, string(raw))
	want(t, h.run(h.alias), OutcomeIdle, 0)
	attach(t, h.srv, "uploads/p.pdf", []byte("%PDF"), "application/pdf")
	h.write("out.txt", []byte("mine"))
	h.srv.PostAs(bhtest.PersonUserID, bhtest.SessionID, h.alias, blobhub.NewItem{Content: []blobhub.Block{fileBlock("uploads/p.pdf", "p.pdf", "application/pdf", 4)}})
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "ok"}}}})
	want(t, h.run(h.alias), OutcomeTurnCompleted, 0)
	if m, _ := filepath.Glob(filepath.Join(h.outbox, "in", "*", "p.pdf")); len(m) != 1 {
		var got []string
		for _, it := range h.srv.Items(h.alias) {
			got = append(got, string(it.Metadata))
		}
		t.Fatalf("the attachment is not in the inbox: %v\n%s", m, strings.Join(got, "\n"))
	}
	for _, it := range h.publishedItems() {
		if strings.Contains(string(it.Metadata), "p.pdf") || len(it.Content) != 2 {
			t.Fatalf("published %s %+v", it.Metadata, it.Content)
		}
	}
}

func mustGet(t *testing.T, srv *bhtest.Server, alias string) []byte {
	t.Helper()
	o, ok := srv.Get(alias)
	if !ok {
		t.Fatalf("no %s", alias)
	}
	return o.Value
}
