package run

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/envelope"
)

const (
	workerPrefix = "deliverables/t1/"
	workerOutbox = ".blobhub/outbox"
)

// publishHarness is a thread with blobhub-worker's artifacts {prefix,
// outbox}, whose client counts file uploads.
type publishHarness struct {
	*harness
	alias, outbox string
	mu            sync.Mutex
	uploads       map[string]int
}

type fileCountingClient struct {
	blobhub.Client
	h *publishHarness
}

func (c *fileCountingClient) UploadFile(ctx context.Context, alias string, data []byte, name, ct string) (blobhub.FileInfo, error) {
	c.h.mu.Lock()
	c.h.uploads[alias]++
	c.h.mu.Unlock()
	return c.Client.UploadFile(ctx, alias, data, name, ct)
}

func newPublishHarness(t *testing.T, local bool, block string) *publishHarness {
	h := &publishHarness{harness: newHarness(t, local), alias: "projects/p1/w1", uploads: map[string]int{}}
	h.outbox = filepath.Join(h.work, workerOutbox)
	h.runner = func(r *Runner) { r.Client = &fileCountingClient{Client: r.Client, h: h} }
	raw, err := envelope.SetPath(envelope.NewThread(h.work, testAgent, "approval", h.alias),
		[]string{"thread", "metadata", "artifacts"}, json.RawMessage(block))
	if err != nil {
		t.Fatal(err)
	}
	h.srv.Put(h.alias, string(raw))
	return h
}

func (h *publishHarness) write(rel string, data []byte) {
	h.t.Helper()
	p := filepath.Join(h.outbox, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		h.t.Fatal(err)
	}
}

func (h *publishHarness) turn() {
	h.t.Helper()
	h.srv.PersonPost(h.alias, "go on")
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "done"}}}})
	want(h.t, h.run(h.alias), OutcomeTurnCompleted, 0)
}

// publishedItems are the thread's artifacts_published items.
func (h *publishHarness) publishedItems() []blobhub.Item {
	var out []blobhub.Item
	for _, it := range h.srv.Items(h.alias) {
		if strings.Contains(string(it.Metadata), `"type":"artifacts_published"`) {
			out = append(out, it)
		}
	}
	return out
}

type publishedMeta struct {
	Aliases []string            `json:"aliases"`
	Skipped []map[string]string `json:"skipped"`
	Counts  struct {
		Published, Skipped int
	} `json:"counts"`
	Error string `json:"error"`
	Part  *struct {
		Index, Total int
	} `json:"part"`
}

// TestPublishWorkerForm: with blobhub-worker's artifacts {prefix, outbox}
// the outbox is made at activation with a .gitignore of "*"; every file of
// it is uploaded as a session file at prefix + its path before the turn's
// turn_end, and downloads byte-identical; one artifacts_published item
// {aliases, skipped, counts} carries them as file blocks; a file over
// 4 MiB is skipped as too_large; a name outside the alias grammar gets a
// tagged alias; the next turn publishes every file again (no diff), with
// its own item.
func TestPublishWorkerForm(t *testing.T) {
	for _, local := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "file"}[local], func(t *testing.T) {
			h := newPublishHarness(t, local, `{"prefix":"`+workerPrefix+`","outbox":"`+workerOutbox+`"}`)
			want(t, h.run(h.alias), OutcomeIdle, 0)
			if b, err := os.ReadFile(filepath.Join(h.outbox, ".gitignore")); err != nil || string(b) != "*\n" {
				t.Fatalf(".gitignore %q, %v", b, err)
			}
			bin := make([]byte, 100_000)
			_, _ = rand.Read(bin)
			files := map[string][]byte{"report.md": []byte("# report\n"), "sub/data.bin": bin, "my notes.txt": []byte("n")}
			for rel, b := range files {
				h.write(rel, b)
			}
			h.write("big.bin", make([]byte, blobhub.MaxFileBytes+1))
			h.turn()

			items := h.items(h.alias)
			if i := slices.Index(items, "artifacts_published"); i < 0 || items[i+1] != "turn_end" || items[len(items)-1] != "turn_end" {
				t.Fatalf("items %v: artifacts_published must come right before turn_end", items)
			}
			pub := h.publishedItems()
			if len(pub) != 1 {
				t.Fatalf("%d artifacts_published items, want 1", len(pub))
			}
			var m publishedMeta
			_ = json.Unmarshal(pub[0].Metadata, &m)
			if m.Counts.Published != 3 || m.Counts.Skipped != 1 || len(m.Skipped) != 1 || m.Skipped[0]["path"] != "big.bin" || m.Skipped[0]["reason"] != "too_large" || m.Part != nil {
				t.Fatalf("artifacts_published %s", pub[0].Metadata)
			}
			var blocks []*blobhub.FileRef
			for _, b := range pub[0].Content[1:] {
				if b.Type == "file" {
					blocks = append(blocks, b.File)
				}
			}
			if len(blocks) != 3 || pub[0].Content[0].Text != "Published 3 artifact(s), skipped 1" {
				t.Fatalf("content %+v", pub[0].Content)
			}
			c := h.client()
			for _, b := range blocks {
				var rel string
				switch {
				case b.Alias == workerPrefix+"report.md":
					rel = "report.md"
				case b.Alias == workerPrefix+"sub/data.bin":
					rel = "sub/data.bin"
				case strings.HasPrefix(b.Alias, workerPrefix+"my_notes-") && strings.HasSuffix(b.Alias, ".txt"):
					rel = "my notes.txt"
				default:
					t.Fatalf("unexpected alias %q", b.Alias)
				}
				f, data, err := c.DownloadFile(t.Context(), b.Alias)
				if err != nil || !bytes.Equal(data, files[rel]) || f.Name != filepath.Base(rel) || b.Size != int64(len(files[rel])) {
					t.Fatalf("%s: %+v, %d bytes, %v", b.Alias, f, len(data), err)
				}
				if !slices.Contains(m.Aliases, b.Alias) {
					t.Fatalf("aliases %v lack %s", m.Aliases, b.Alias)
				}
			}
			if _, _, err := c.DownloadFile(t.Context(), workerPrefix+".gitignore"); err == nil {
				t.Fatal("the outbox's .gitignore was published")
			}
			if _, ok := h.srv.Get(h.alias + "/artifacts/report.md"); ok {
				t.Fatal("an artifact object of the earlier form was written")
			}
			// Every turn publishes the whole outbox again, in place.
			h.turn()
			if n := len(h.publishedItems()); n != 2 || h.uploads[workerPrefix+"report.md"] != 2 {
				t.Fatalf("second turn: %d items, %d uploads of report.md", n, h.uploads[workerPrefix+"report.md"])
			}
			h.noneTwice(h.alias)
		})
	}
}

// TestPublishManyParts: 25 files go ten to an item: three items, each
// with part {index, total}; only the first lists aliases and skips.
func TestPublishManyParts(t *testing.T) {
	h := newPublishHarness(t, false, `{"prefix":"`+workerPrefix+`","outbox":"`+workerOutbox+`"}`)
	want(t, h.run(h.alias), OutcomeIdle, 0)
	for i := range 25 {
		h.write(filepath.Join("f", string(rune('a'+i))+".txt"), []byte{byte(i)})
	}
	h.turn()
	pub := h.publishedItems()
	if len(pub) != 3 {
		t.Fatalf("%d items, want 3", len(pub))
	}
	total := 0
	for i, it := range pub {
		var m publishedMeta
		_ = json.Unmarshal(it.Metadata, &m)
		if m.Part == nil || m.Part.Index != i+1 || m.Part.Total != 3 || m.Counts.Published != 25 || (i == 0) != (m.Aliases != nil) {
			t.Fatalf("item %d: %s", i, it.Metadata)
		}
		total += len(it.Content) - 1
	}
	if total != 25 {
		t.Fatalf("%d file blocks, want 25", total)
	}
}

// TestPublishBlockUnusable: an artifacts block blobhub-worker would not
// use (no / at the prefix's end, a missing outbox, not a mapping, an
// outbox outside the work folder) is warned on the thread; nothing is
// published and the thread runs.
func TestPublishBlockUnusable(t *testing.T) {
	for name, block := range map[string]string{
		"prefix without /": `{"prefix":"out","outbox":".o"}`,
		"outbox missing":   `{"prefix":"out/"}`,
		"a string":         `"out/"`,
		"outbox outside":   `{"prefix":"out/","outbox":"../x"}`,
		"prefix a number":  `{"prefix":3,"outbox":".o"}`,
	} {
		t.Run(name, func(t *testing.T) {
			h := newPublishHarness(t, false, block)
			h.turn()
			if n := len(h.publishedItems()); n != 0 {
				t.Fatalf("%d artifacts_published items", n)
			}
			warned := 0
			for _, it := range h.srv.Items(h.alias) {
				if strings.Contains(string(it.Metadata), `"status":"artifacts_invalid"`) {
					warned++
				}
			}
			if warned != 1 {
				t.Fatalf("%d warnings, want 1", warned)
			}
		})
	}
}

// TestPublishExactlyOnceAfterKill: bhw-run killed with SIGKILL after
// each journal write of a turn that publishes, then a normal run: every
// turn on the thread has exactly one artifacts_published, with the file,
// right before its turn_end, each posted once; nothing stays open in the
// journal; the file downloads as written.
func TestPublishExactlyOnceAfterKill(t *testing.T) {
	steps := 0
	for n := 1; n < 60; n++ {
		h := newPublishHarness(t, true, `{"prefix":"`+workerPrefix+`","outbox":"`+workerOutbox+`"}`)
		want(t, h.run(h.alias), OutcomeIdle, 0)
		h.write("a.txt", []byte("a"))
		h.srv.PersonPost(h.alias, "publish it")
		h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "done"}}}})
		killed, code := h.runKilled(h.alias, n)
		if !killed {
			if code != 0 {
				t.Fatalf("clean run: exit %d", code)
			}
			steps = n - 1
			break
		}
		if sum := h.run(h.alias); sum.ExitCode != 0 {
			t.Fatalf("kill at %d: the next run exits %d (%+v)", n, sum.ExitCode, sum.Error)
		}
		h.noneTwice(h.alias)
		// A kill before thread.yaml recorded the turn's end has the next
		// run do the turn again: each turn has its own publication, right
		// before its turn_end, and no turn has two.
		items := h.items(h.alias)
		pub := h.publishedItems()
		if len(pub) == 0 || len(pub) != count(items, "turn_end") {
			t.Fatalf("kill at %d: %d artifacts_published for %d turn_end; items %v", n, len(pub), count(items, "turn_end"), items)
		}
		for i, typ := range items {
			if typ == "artifacts_published" && (i+1 >= len(items) || items[i+1] != "turn_end") {
				t.Fatalf("kill at %d: items %v", n, items)
			}
		}
		for _, p := range pub {
			if len(p.Content) != 2 || p.Content[1].File == nil || p.Content[1].File.Alias != workerPrefix+"a.txt" {
				t.Fatalf("kill at %d: artifacts_published %+v", n, p.Content)
			}
		}
		if open := h.journalOpen(h.alias); open != 0 {
			t.Fatalf("kill at %d: %d journal entries open", n, open)
		}
		if _, data, err := h.client().DownloadFile(t.Context(), workerPrefix+"a.txt"); err != nil || string(data) != "a" {
			t.Fatalf("kill at %d: a.txt %q %v", n, data, err)
		}
	}
	if steps < 5 {
		t.Fatalf("only %d journal writes in a clean turn", steps)
	}
	t.Logf("killed after each of %d journal writes", steps)
}

// TestWorkerAliases: aliases as blobhub-worker derives them (the values
// are what its assign_aliases answers for the same paths): the literal
// prefix + path when valid; otherwise the characters outside the grammar
// mapped to _, a tag of the path's sha256 before the extension, cut to 256.
func TestWorkerAliases(t *testing.T) {
	long := strings.Repeat("x", 300) + ".md"
	want := map[string]string{
		"a.md": "p/a.md", ".env": "p/.env", "a b/c d.tar.gz": "p/a_b/c_d.tar-5e8fc5.gz",
		"my notes.txt": "p/my_notes-7c7346.txt", "weird\u0001name": "p/weird_name-7a3a40", "x/..": "p/x/..-def8dc",
		"é/..hidden": "p/_/.-7ca030.hidden", long: "p/" + strings.Repeat("x", 256-2-7-3) + "-956975.md",
	}
	var rels []string
	for r := range want {
		rels = append(rels, r)
	}
	got := workerAliases("p/", rels)
	for r, w := range want {
		if got[r] != w {
			t.Errorf("%q: alias %q, want %q", r, got[r], w)
		}
	}
}
