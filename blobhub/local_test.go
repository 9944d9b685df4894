package blobhub_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/blobhub/bhw-run/blobhub"
)

// TestMain re-executes the test binary as a poster process for the
// several-process test: BLOBHUB_TEST_POSTER=<dir> posts
// BLOBHUB_TEST_POSTS items and exits.
func TestMain(m *testing.M) {
	if dir := os.Getenv("BLOBHUB_TEST_POSTER"); dir != "" {
		os.Exit(poster(dir))
	}
	os.Exit(m.Run())
}

func poster(dir string) int {
	n, _ := strconv.Atoi(os.Getenv("BLOBHUB_TEST_POSTS"))
	c, err := blobhub.New(blobhub.Config{APIURL: "file://" + dir, SessionID: "ses", UserID: "usr_proc"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	for i := range n {
		alias := []string{"a", "b/c"}[i%2]
		if _, err := c.Post(ctx, alias, text(fmt.Sprintf("pid %d #%d", os.Getpid(), i))); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

func TestLocalConcurrentPosts(t *testing.T) {
	dir := t.TempDir()
	const procs, perProc, goroutines, perG = 3, 40, 4, 40
	for _, alias := range []string{"a", "b/c"} {
		if err := blobhub.OpenLocalStore(dir).Upload(t.Context(), "ses", alias, json.RawMessage(`{"type":"thread"}`)); err != nil {
			t.Fatal(err)
		}
	}

	// Several processes…
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var cmds []*exec.Cmd
	for range procs {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), "BLOBHUB_TEST_POSTER="+dir, "BLOBHUB_TEST_POSTS="+strconv.Itoa(perProc))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	// …and several goroutines, each with its own client, at the same time.
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			c, err := blobhub.New(blobhub.Config{APIURL: "file://" + dir, SessionID: "ses"})
			if err != nil {
				errs <- err
				return
			}
			for i := range perG {
				alias := []string{"a", "b/c"}[(g+i)%2]
				if _, err := c.Post(t.Context(), alias, text(fmt.Sprintf("g%d #%d", g, i))); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("poster process: %v", err)
		}
	}

	store := blobhub.OpenLocalStore(dir)
	var all []blobhub.Item
	for _, alias := range []string{"a", "b/c"} {
		items, err := store.AllItems(t.Context(), "ses", alias)
		if err != nil {
			t.Fatal(err)
		}
		// Within a thread, file order is created_at order, strictly.
		for i := 1; i < len(items); i++ {
			if items[i].CreatedAt <= items[i-1].CreatedAt {
				t.Fatalf("%s: created_at not increasing: %s then %s", alias, items[i-1].CreatedAt, items[i].CreatedAt)
			}
		}
		all = append(all, items...)
	}
	if want := procs*perProc + goroutines*perG; len(all) != want {
		t.Fatalf("%d items stored, want %d", len(all), want)
	}
	// Across the session, ids and created_at are unique.
	ids, stamps := map[string]bool{}, map[string]bool{}
	users := map[string]int{}
	for _, it := range all {
		if ids[it.ID] || stamps[it.CreatedAt] {
			t.Fatalf("duplicate id or created_at: %+v", it)
		}
		ids[it.ID], stamps[it.CreatedAt] = true, true
		users[it.UserID]++
	}
	if users["usr_proc"] != procs*perProc || users["usr_local"] != goroutines*perG {
		t.Errorf("user ids %v", users)
	}
}

func TestLocalStore(t *testing.T) {
	dir := t.TempDir()
	c := newClient(t, blobhub.Config{APIURL: "file://" + dir, RevisionID: "rev", SessionID: "ses/1"})
	ctx := t.Context()

	if u, err := c.Me(ctx); err != nil || u.UserID != "usr_local" {
		t.Fatalf("Me = %+v, %v", u, err)
	}
	if _, err := c.List(ctx); !errors.Is(err, blobhub.ErrNotFound) {
		t.Fatalf("List of an unused session = %v, want ErrNotFound", err)
	}
	if _, err := c.Download(ctx, "a"); !errors.Is(err, blobhub.ErrNotFound) {
		t.Fatalf("Download = %v, want ErrNotFound", err)
	}
	aliases := []string{"a", "A", "a/b", "a%2Fb", ".hidden", "..", "a/../../escape", "ünï/ç", "x~y"}
	for i, a := range aliases {
		if err := c.Upload(ctx, a, json.RawMessage(fmt.Sprintf(`{"type":"thread","i":%d}`, i))); err != nil {
			t.Fatalf("Upload %q: %v", a, err)
		}
	}
	for i, a := range aliases {
		o, err := c.Download(ctx, a)
		if err != nil || string(o.Value) != fmt.Sprintf(`{"type":"thread","i":%d}`, i) || o.RevisionID != "rev" || o.Alias != a {
			t.Fatalf("Download %q = %+v (%s), %v", a, o, o.Value, err)
		}
	}
	got, err := c.List(ctx)
	if err != nil || len(got) != len(aliases) {
		t.Fatalf("List = %q, %v", got, err)
	}
	// Nothing escaped the session's objects folder, and no temp file is
	// left (beside the session's own files: its lock, clock and feed).
	var files []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			if own := filepath.Join("sessions", "ses%2F1"); filepath.Dir(rel) == own && (d.Name() == "session.lock" || d.Name() == "clock" || d.Name() == "events.jsonl") {
				return nil
			}
			files = append(files, rel)
		}
		return nil
	})
	for _, f := range files {
		if !strings.HasPrefix(f, filepath.Join("sessions", "ses%2F1", "objects")+"/") || strings.Contains(f, ".tmp-") {
			t.Errorf("unexpected file %s", f)
		}
	}
	if len(files) != len(aliases) {
		t.Errorf("files %q", files)
	}

	// Items: a person client on the same store, one user id each.
	person := newClient(t, blobhub.Config{APIURL: "file://" + dir, SessionID: "ses/1", UserID: "usr_person"})
	it1, err := c.Post(ctx, "a/b", text("runner"))
	if err != nil {
		t.Fatal(err)
	}
	it2, err := person.Post(ctx, "a/b", text("person"))
	if err != nil {
		t.Fatal(err)
	}
	if it1.UserID != "usr_local" || it2.UserID != "usr_person" || it2.CreatedAt <= it1.CreatedAt || !strings.HasSuffix(it1.CreatedAt, "+00:00") {
		t.Fatalf("items %+v %+v", it1, it2)
	}
	if _, err := c.Post(ctx, "a/b", blobhub.NewItem{Content: []blobhub.Block{{Type: "image"}}}); err == nil {
		t.Error("a block of type image: no error")
	}
	if _, err := c.Post(ctx, "a/b", text(strings.Repeat("x", blobhub.MaxItemBytes))); !errors.Is(err, blobhub.ErrItemTooLarge) {
		t.Errorf("oversized post = %v", err)
	}
	// A torn last line (a crash mid-append) is skipped and the next item
	// starts on its own line.
	jsonl := filepath.Join(dir, "sessions", "ses%2F1", "items", "a%2Fb.jsonl")
	f, err := os.OpenFile(jsonl, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"id":"itm_torn","crea`)
	f.Close()
	it3, err := c.Post(ctx, "a/b", text("after the tear"))
	if err != nil {
		t.Fatal(err)
	}
	items, err := listed(c.ListItems(ctx, "a/b", blobhub.ItemQuery{Ascending: true}))
	if err != nil {
		t.Fatal(err)
	}
	assertIDs(t, items, it1, it2, it3)
}

// TestLocalAtomicUpload: readers racing a writer always see one whole value.
func TestLocalAtomicUpload(t *testing.T) {
	dir := t.TempDir()
	w := newClient(t, blobhub.Config{APIURL: "file://" + dir, SessionID: "s"})
	big := func(c byte) json.RawMessage {
		return json.RawMessage(`{"type":"thread","pad":"` + strings.Repeat(string(c), 32<<10) + `"}`)
	}
	a, b := big('a'), big('b')
	if err := w.Upload(t.Context(), "x", a); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			r := newClient(t, blobhub.Config{APIURL: "file://" + dir, SessionID: "s"})
			for {
				select {
				case <-done:
					return
				default:
				}
				o, err := r.Download(t.Context(), "x")
				if err != nil || !bytes.Equal(o.Value, a) && !bytes.Equal(o.Value, b) {
					t.Errorf("torn read: %v (%d bytes)", err, len(o.Value))
					return
				}
			}
		})
	}
	for i := range 20 {
		if err := w.Upload(t.Context(), "x", [2]json.RawMessage{a, b}[i%2]); err != nil {
			t.Error(err)
			break
		}
	}
	close(done)
	wg.Wait()
}

func BenchmarkLocalPost(b *testing.B) {
	c, err := blobhub.New(blobhub.Config{APIURL: "file://" + b.TempDir(), SessionID: "s"})
	if err != nil {
		b.Fatal(err)
	}
	p := text("a line of agent output, as long as a typical brief")
	for b.Loop() {
		if _, err := c.Post(b.Context(), "thread", p); err != nil {
			b.Fatal(err)
		}
	}
}

func TestLocalCancelled(t *testing.T) {
	c := newClient(t, blobhub.Config{APIURL: "file://" + t.TempDir(), SessionID: "s"})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := c.Post(ctx, "a", text("x")); !errors.Is(err, blobhub.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Errorf("Post = %v", err)
	}
	if _, err := c.Download(ctx, "a"); !errors.Is(err, blobhub.ErrUnavailable) {
		t.Errorf("Download = %v", err)
	}
}
