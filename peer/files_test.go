//go:build realcli

package peer_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
)

// TestPeerSessionFiles: a session file bhw-run uploads (over HTTP, the
// bytes as the body and the command in X-Request-Body) downloads
// byte-identical through blobhub-worker's client (download_session_file),
// binary bytes and an empty file included, with the name and content type
// it was given; a file that client uploads downloads byte-identical through
// bhw-run's HTTP client and its file:// store.
func TestPeerSessionFiles(t *testing.T) {
	srv := bhtest.New(t)
	c := srv.Client(bhtest.RunnerKey)
	bin := make([]byte, 300_000)
	_, _ = rand.Read(bin)
	files := map[string][]byte{"th/out/a.bin": bin, "th/out/empty.txt": {}, "th/out/ü.md": []byte("# héllo\n")}
	for alias, data := range files {
		if _, err := c.UploadFile(t.Context(), alias, data, filepath.Base(alias), "application/octet-stream"); err != nil {
			t.Fatalf("upload %s: %v", alias, err)
		}
	}
	args := []string{filepath.Join("testdata", "sdk_files.py"), "download"}
	for alias := range files {
		args = append(args, alias)
	}
	var got map[string]struct {
		SHA256 string           `json:"sha256"`
		Size   int              `json:"size"`
		File   blobhub.FileInfo `json:"file"`
	}
	if err := json.Unmarshal(runPeer(t, srv, args...), &got); err != nil {
		t.Fatal(err)
	}
	for alias, data := range files {
		sum := sha256.Sum256(data)
		g := got[alias]
		if g.SHA256 != hex.EncodeToString(sum[:]) || g.Size != len(data) || g.File.Name != filepath.Base(alias) || g.File.Size != int64(len(data)) {
			t.Errorf("%s through the peer's client: %+v, want %d bytes named %s", alias, g, len(data), filepath.Base(alias))
		}
	}

	src := filepath.Join(t.TempDir(), "p.bin")
	if err := os.WriteFile(src, bin[:70_000], 0o600); err != nil {
		t.Fatal(err)
	}
	runPeer(t, srv, filepath.Join("testdata", "sdk_files.py"), "upload", "th/in/p.bin", src, "p.bin", "application/pdf")
	for name, cl := range map[string]blobhub.Client{"HTTP": c, "file://": localClient(t, srv)} {
		f, data, err := cl.DownloadFile(t.Context(), "th/in/p.bin")
		if err != nil || !bytes.Equal(data, bin[:70_000]) || f.ContentType != "application/pdf" || f.Name != "p.bin" {
			t.Errorf("%s: the peer's upload read back as %+v, %d bytes, %v", name, f, len(data), err)
		}
	}
}

// localClient is a file:// client of the store srv serves.
func localClient(t *testing.T, srv *bhtest.Server) blobhub.Client {
	t.Helper()
	c, err := blobhub.New(blobhub.Config{APIURL: "file://" + srv.Dir(), RevisionID: bhtest.RevisionID, SessionID: bhtest.SessionID, UserID: bhtest.RunnerUserID})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
