package run

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/setup"
	"gopkg.in/yaml.v3"
)

// TestOtherThreadFoldersCache: what the cache remembers never hides a
// change: a thread.yaml rewritten to another work folder (same size, same
// mtime, as a fast rewrite can be) names the new one, a new thread is
// found, a removed one is forgotten, and a cache that is garbage or
// missing only costs the decoding.
func TestOtherThreadFoldersCache(t *testing.T) {
	state := t.TempDir()
	job := filepath.Join(state, "jobs", setup.JobType+"-ses_t")
	write := func(alias, work string) string {
		t.Helper()
		th := &envelope.Thread{Alias: alias}
		th.Workspace.WorkFolder = work
		th.Agent.Resolved.AgentHome = work + "-home"
		dir := setup.ThreadDir(job, alias)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "thread.yaml")
		b, err := yaml.Marshal(th)
		if err != nil {
			t.Fatal(err)
		}
		if err := setup.WriteStateFile(p, b); err != nil {
			t.Fatal(err)
		}
		return p
	}
	want := func(what string, folders ...string) {
		t.Helper()
		got := otherThreadFolders(state)
		slices.Sort(got)
		slices.Sort(folders)
		if !slices.Equal(got, folders) {
			t.Fatalf("%s: %v, want %v", what, got, folders)
		}
	}
	a := write("p/a", "/srv/aaaa")
	write("p/b", "/srv/bbbb")
	want("first", "/srv/aaaa", "/srv/aaaa-home", "/srv/bbbb", "/srv/bbbb-home")
	cache := filepath.Join(state, "cache", threadFoldersFile)
	if b, err := os.ReadFile(cache); err != nil || !strings.Contains(string(b), "/srv/bbbb") {
		t.Fatalf("cache %q, %v", b, err)
	}
	want("from the cache", "/srv/aaaa", "/srv/aaaa-home", "/srv/bbbb", "/srv/bbbb-home")

	fi, err := os.Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	write("p/a", "/srv/cccc") // the same length: the same size
	if err := os.Chtimes(a, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if fi2, _ := os.Stat(a); fi2.Size() != fi.Size() {
		t.Fatalf("size %d, want %d", fi2.Size(), fi.Size())
	}
	want("rewritten", "/srv/cccc", "/srv/cccc-home", "/srv/bbbb", "/srv/bbbb-home")

	write("p/d", "/srv/dddd")
	if err := os.RemoveAll(setup.ThreadDir(job, "p/b")); err != nil {
		t.Fatal(err)
	}
	want("one new, one gone", "/srv/cccc", "/srv/cccc-home", "/srv/dddd", "/srv/dddd-home")
	if b, _ := os.ReadFile(cache); strings.Contains(string(b), "/srv/bbbb") {
		t.Errorf("the cache still names the removed thread: %s", b)
	}

	if err := os.WriteFile(cache, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	want("a garbage cache", "/srv/cccc", "/srv/cccc-home", "/srv/dddd", "/srv/dddd-home")
	if err := os.Remove(cache); err != nil {
		t.Fatal(err)
	}
	want("no cache", "/srv/cccc", "/srv/cccc-home", "/srv/dddd", "/srv/dddd-home")
}
