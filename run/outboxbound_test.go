package run

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/exit"
)

// archiveFiles reads the archive published as rel: path → bytes.
func (h *artifactHarness) archiveFiles(rel string) map[string]string {
	h.t.Helper()
	obj, ok := h.object(rel)
	if !ok {
		h.t.Fatalf("no archive %s", rel)
	}
	b, err := base64.StdEncoding.DecodeString(obj.Data)
	if err != nil || obj.MediaType != packMediaType || obj.Encoding != "base64" {
		h.t.Fatalf("archive %s: %s, %s: %v", rel, obj.MediaType, obj.Encoding, err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		h.t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	out := map[string]string{}
	for {
		hd, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			h.t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		out[hd.Name] = string(data)
	}
}

// bounded lists the artifacts_bounded status items' metadata.
func (h *artifactHarness) bounded() []map[string]any {
	var out []map[string]any
	for _, it := range h.srv.Items(h.alias) {
		var m map[string]any
		_ = json.Unmarshal(it.Metadata, &m)
		if m["type"] == "status" && m["status"] == "artifacts_bounded" {
			out = append(out, m)
		}
	}
	return out
}

// archives are the announced aliases that are archives.
func archives(announced map[string]int) []string {
	var out []string
	for a := range announced {
		if strings.HasPrefix(a, "more-files-") {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out
}

// TestOutboxBounded: a turn that leaves more files than
// artifacts.max_files publishes that many one by one and the rest as one
// tar.gz, says so in one status item, and records every file, so the next
// turn publishes nothing again.
func TestOutboxBounded(t *testing.T) {
	h := newArtifactHarness(t, false)
	h.cfg = "artifacts:\n  max_files: 3\n"
	h.writeConfig()
	h.activate()
	want := map[string]string{}
	for i := range 12 {
		rel := fmt.Sprintf("f%02d.txt", i)
		if i%2 == 1 {
			rel = "sub/" + rel
		}
		want[rel] = fmt.Sprintf("content %d\n", i)
		h.write(rel, want[rel])
	}
	h.turn()
	ann := h.announced()
	arch := archives(ann)
	if len(ann) != 4 || ann["f00.txt"] != 1 || ann["f02.txt"] != 1 || ann["f04.txt"] != 1 || len(arch) != 1 || ann[arch[0]] != 1 {
		t.Fatalf("announced %v, want the first 3 by path and one archive", ann)
	}
	uploads := 0
	for a, n := range h.uploads {
		if strings.HasPrefix(a, h.alias+"/artifacts/") {
			uploads += n
		}
	}
	if uploads != 4 {
		t.Fatalf("%d uploads of artifacts, want 4: %v", uploads, h.uploads)
	}
	packed := h.archiveFiles(arch[0])
	if len(packed) != 9 {
		t.Fatalf("the archive holds %v, want the 9 other files", slices.Sorted(maps.Keys(packed)))
	}
	for rel, data := range packed {
		if want[rel] != data {
			t.Fatalf("archive: %s holds %q, want %q", rel, data, want[rel])
		}
	}
	b := h.bounded()
	if len(b) != 1 || b[0]["packed"] != 9.0 || b[0]["left"] != 0.0 || b[0]["archive"] != arch[0] || b[0]["max_files"] != 3.0 {
		t.Fatalf("artifacts_bounded items %v", b)
	}
	pub := h.published(h.alias)
	if len(pub) != 12 || pub["sub/f11.txt"].Alias != h.alias+"/artifacts/"+arch[0] || pub["sub/f11.txt"].SHA256 != sha(want["sub/f11.txt"]) {
		t.Fatalf("artifacts.yaml %+v", pub)
	}
	h.turn()
	if got := h.announced(); len(got) != 4 || len(h.bounded()) != 1 {
		t.Fatalf("a turn with nothing new published %v", got)
	}
}

// TestOutboxBoundedByBytes: what does not fit the archive under
// artifacts.max_bytes waits; later turns publish it, each file once.
func TestOutboxBoundedByBytes(t *testing.T) {
	h := newArtifactHarness(t, false)
	h.cfg = "artifacts:\n  max_files: 2\n  max_bytes: 6000\n"
	h.writeConfig()
	h.activate()
	var rels []string
	for i := range 9 {
		rel := fmt.Sprintf("r%d.txt", i)
		// Text that compresses badly: a different line per byte count.
		var sb strings.Builder
		for j := 0; sb.Len() < 1500; j++ {
			fmt.Fprintf(&sb, "%d:%x\n", i, j*7919+i*104729)
		}
		h.write(rel, sb.String())
		rels = append(rels, rel)
	}
	for turn := 0; turn < 9 && len(h.published(h.alias)) < len(rels); turn++ {
		h.turn()
	}
	if pub := h.published(h.alias); len(pub) != len(rels) {
		t.Fatalf("artifacts.yaml holds %d files after the turns, want %d", len(pub), len(rels))
	}
	ann := h.announced()
	for a, n := range ann {
		if n != 1 {
			t.Fatalf("%s announced %d times", a, n)
		}
	}
	b := h.bounded()
	if len(b) < 2 || b[0]["left"].(float64) == 0 {
		t.Fatalf("artifacts_bounded items %v: want the first to leave files for a later turn", b)
	}
}

// TestKill9OutboxArchive: bhw-run killed after each journal write of a
// turn that publishes files and an archive: the next run finishes it,
// each artifact announced once and every file recorded once.
func TestKill9OutboxArchive(t *testing.T) {
	for n := 1; n < 80; n++ {
		h := newArtifactHarness(t, true)
		h.cfg = "artifacts:\n  max_files: 2\n"
		h.writeConfig()
		h.activate()
		for i := range 5 {
			h.write(fmt.Sprintf("a%d.md", i), fmt.Sprintf("# %d\n", i))
		}
		h.srv.PersonPost(h.alias, "go on")
		h.play(agenttest.Turn(agenttest.Step{Text: "done"}))
		killed, exitCode := h.runKilled(h.alias, n)
		if killed {
			if sum := h.run(h.alias); sum.ExitCode != exit.OK {
				t.Fatalf("kill at %d: the next run exits %d (%+v)", n, sum.ExitCode, sum.Error)
			}
		} else if exitCode != exit.OK {
			t.Fatalf("the clean run exits %d", exitCode)
		}
		h.noneTwice(h.alias)
		// Each file published once, alone or in an archive (a kill before
		// the turn's end runs the turn again, which packs what is left
		// then), and each artifact announced once.
		seen := map[string]int{}
		for a, c := range h.announced() {
			if c != 1 {
				t.Fatalf("kill at %d: %s announced %d times", n, a, c)
			}
			if !strings.HasPrefix(a, "more-files-") {
				seen[a]++
				continue
			}
			for rel, data := range h.archiveFiles(a) {
				if data != "# "+rel[1:2]+"\n" {
					t.Fatalf("kill at %d: archive %s holds %s = %q", n, a, rel, data)
				}
				seen[rel]++
			}
		}
		if len(seen) != 5 || slices.Max(slices.Collect(maps.Values(seen))) != 1 {
			t.Fatalf("kill at %d: published %v; items %v", n, seen, h.items(h.alias))
		}
		if pub := h.published(h.alias); len(pub) != 5 {
			t.Fatalf("kill at %d: artifacts.yaml %v", n, pub)
		}
		if !killed {
			t.Logf("killed after each of %d journal writes", n-1)
			return
		}
	}
	t.Fatal("the run never finished without a kill")
}
