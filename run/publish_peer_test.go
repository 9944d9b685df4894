//go:build realcli

package run

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
)

// TestPublishedReadByPeer: every file bhw-run publishes in
// blobhub-worker's form downloads byte-identical through blobhub-worker's
// own client (download_session_file), with the name and size the file
// block says.
func TestPublishedReadByPeer(t *testing.T) {
	py := agenttest.PinnedCLI(t, "Python peer", "BHW_PEER_PYTHON", ".tools/peer/bin/python")
	h := newPublishHarness(t, false, `{"prefix":"`+workerPrefix+`","outbox":"`+workerOutbox+`"}`)
	want(t, h.run(h.alias), OutcomeIdle, 0)
	bin := make([]byte, 1<<20)
	_, _ = rand.Read(bin)
	files := map[string][]byte{"a.bin": bin, "docs/r é.md": []byte("# r\n"), "empty": {}}
	for rel, b := range files {
		h.write(rel, b)
	}
	h.turn()
	var blocks []*blobhub.FileRef
	for _, it := range h.publishedItems() {
		for _, b := range it.Content {
			if b.Type == "file" {
				blocks = append(blocks, b.File)
			}
		}
	}
	if len(blocks) != len(files) {
		t.Fatalf("%d file blocks, want %d", len(blocks), len(files))
	}
	args := []string{filepath.Join(agenttest.ModuleRoot(t), "peer", "testdata", "sdk_files.py"), "download"}
	for _, b := range blocks {
		args = append(args, b.Alias)
	}
	cmd := exec.CommandContext(t.Context(), py, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LANG=C.UTF-8",
		"BLOBHUB_API_URL=" + h.srv.URL(), "BLOBHUB_API_KEY=" + bhtest.PersonKey,
		"PEER_REVISION_ID=" + bhtest.RevisionID, "PEER_SESSION_ID=" + bhtest.SessionID}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the peer's client: %v\n%s", err, stderr.Bytes())
	}
	var got map[string]struct {
		SHA256 string           `json:"sha256"`
		Size   int64            `json:"size"`
		File   blobhub.FileInfo `json:"file"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		var data []byte
		for rel, d := range files {
			if filepath.Base(rel) == b.Name {
				data = d
			}
		}
		sum := sha256.Sum256(data)
		g := got[b.Alias]
		if g.SHA256 != hex.EncodeToString(sum[:]) || g.Size != b.Size || g.File.Name != b.Name || g.File.Size != b.Size {
			t.Errorf("%s through the peer: %+v, want %d bytes of %s", b.Alias, g, len(data), b.Name)
		}
	}
}
