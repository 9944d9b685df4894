package envelope

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// TestScannedLoadsAsBefore: a thread.yaml written before items.scanned had
// ahead loads as it did and is written back byte for byte (so an idle run
// does not rewrite it) without the new key; one with ahead keeps it.
func TestScannedLoadsAsBefore(t *testing.T) {
	old := `alias: a/b
items:
    last_consumed:
        item_id: ""
        created_at: ""
    last_posted:
        item_id: ""
        created_at: ""
    scanned:
        created_at: "2026-01-01T00:00:00.000000+00:00"
        ids:
            - itm_1
    pending_inbound: []
`
	path := filepath.Join(t.TempDir(), "thread.yaml")
	if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	th, err := LoadThread(path)
	if err != nil {
		t.Fatal(err)
	}
	sc := th.Items.Scanned
	if sc.CreatedAt != "2026-01-01T00:00:00.000000+00:00" || !slices.Equal(sc.IDs, []string{"itm_1"}) || sc.Ahead != nil {
		t.Fatalf("scanned %+v", sc)
	}
	b, err := yaml.Marshal(th)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "ahead") {
		t.Fatalf("an empty ahead is written:\n%s", b)
	}
	var back Thread
	if err := yaml.Unmarshal(b, &back); err != nil || !slices.Equal(back.Items.Scanned.IDs, sc.IDs) {
		t.Fatalf("round trip: %+v, %v", back.Items.Scanned, err)
	}

	th.Items.Scanned.Ahead = []ItemRef{{ItemID: "itm_2099", CreatedAt: "2099-01-01T00:00:00.000000+00:00"}}
	b, _ = yaml.Marshal(th)
	back = Thread{}
	if err := yaml.Unmarshal(b, &back); err != nil || !slices.Equal(back.Items.Scanned.Ahead, th.Items.Scanned.Ahead) {
		t.Fatalf("ahead round trip: %+v, %v\n%s", back.Items.Scanned, err, b)
	}
}

// TestLoadPublishedRefusesALinkOrAPipe: artifacts.yaml is a file of the
// state tree like thread.yaml: a link in its place is not followed (its
// target is not read as the thread's record) and a named pipe is refused
// without blocking the run.
func TestLoadPublishedRefusesALinkOrAPipe(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(dir, "outside.yaml")
	if err := os.WriteFile(outside, []byte("published:\n  a.txt:\n    sha256: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "artifacts.yaml")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	if p, err := LoadPublished(link); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("a link at artifacts.yaml: %+v, %v; want it refused as a symbolic link", p, err)
	}
	pipe := filepath.Join(dir, "pipe.yaml")
	if err := syscall.Mkfifo(pipe, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := LoadPublished(pipe); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "named pipe") {
			t.Errorf("a named pipe at artifacts.yaml: %v; want it refused as a named pipe", err)
		}
	case <-time.After(10 * time.Second):
		if f, err := os.OpenFile(pipe, os.O_RDWR, 0); err == nil {
			f.Close()
		}
		t.Fatal("LoadPublished blocked on a named pipe")
	}
}
