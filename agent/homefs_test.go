package agent

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// planted is an agent's folder with what a hostile agent leaves for its
// runner: a link to a secret file and to a secret folder, a named pipe,
// and a 256 MiB sparse file. secret is the stand-in for ~/.blobhub.
func planted(t *testing.T) (dir, secret string) {
	t.Helper()
	dir, secret = t.TempDir(), t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(secret, "credentials.yaml"), []byte("key\n"), 0o600))
	must(os.Symlink(filepath.Join(secret, "credentials.yaml"), filepath.Join(dir, "link")))
	must(os.Symlink(secret, filepath.Join(dir, "linkdir")))
	must(syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600))
	f, err := os.Create(filepath.Join(dir, "sparse"))
	must(err)
	must(f.Truncate(256 << 20))
	must(f.Close())
	return dir, secret
}

// TestAgentFolderFollowsNothing: a read of a planted link, pipe or sparse
// file in an agent's folder fails at once without following, blocking or
// allocating; a write replaces a planted link or pipe rather than going
// through it, and refuses a folder that is a link.
func TestAgentFolderFollowsNothing(t *testing.T) {
	dir, secret := planted(t)
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, name := range []string{"link", "fifo", "sparse", "linkdir/credentials.yaml"} {
		t0 := time.Now()
		b, err := ReadAgentFile(dir, name)
		if err == nil {
			t.Errorf("%s: read %d bytes, want an error", name, len(b))
		}
		if d := time.Since(t0); d > 2*time.Second {
			t.Errorf("%s: the read took %s", name, d)
		}
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
		t.Errorf("the reads allocated %d bytes", grew)
	}
	for _, name := range []string{"link", "fifo"} {
		if err := WriteFileIn(dir, name, []byte("settings\n")); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s after the write: %v %v, want a regular file", name, fi, err)
		}
	}
	if err := WriteFileIn(dir, "linkdir/credentials.yaml", []byte("settings\n")); err == nil || !strings.Contains(err.Error(), "follows nothing") {
		t.Errorf("a write through a linked folder: %v", err)
	}
	if err := MkdirIn(dir, "linkdir/sub"); err == nil {
		t.Error("MkdirIn went through a linked folder")
	}
	if b, _ := os.ReadFile(filepath.Join(secret, "credentials.yaml")); string(b) != "key\n" {
		t.Errorf("the secret is now %q", b)
	}
	if entries, _ := os.ReadDir(secret); len(entries) != 1 {
		t.Errorf("the secret folder holds %d entries", len(entries))
	}
	if b, err := ReadAgentFile(dir, "link"); err != nil || string(b) != "settings\n" {
		t.Errorf("a regular file reads %q, %v", b, err)
	}
}
