package run

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/setup"
)

// activeWithFiles hands off alias and runs its first turn, so that every
// state file a turn touches exists; it returns the thread's folder.
func activeWithFiles(t *testing.T, h *harness, alias string) string {
	t.Helper()
	h.handOff(alias, "approval", "first")
	h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "one"}}}})
	want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
	return setup.ThreadDir(h.setup().JobDir, alias)
}

// runWithin runs alias in a goroutine and fails the test if the run has
// not ended within d (a named pipe where a file belongs used to block a
// run in open(2)); unblock is called then so the goroutine can end.
func runWithin(t *testing.T, h *harness, alias string, d time.Duration, unblock func()) *Summary {
	t.Helper()
	done := make(chan *Summary, 1)
	go func() { done <- h.run(alias) }()
	select {
	case sum := <-done:
		return sum
	case <-time.After(d):
		unblock()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
		t.Fatalf("the run did not end within %v", d)
		return nil
	}
}

// unblockFIFO opens the named pipe at path both ways for an instant, which
// lets an open(2) blocked on it return.
func unblockFIFO(path string) func() {
	return func() {
		for range 3 {
			if f, err := os.OpenFile(path, os.O_RDWR, 0); err == nil {
				f.Close()
			}
		}
	}
}

// TestStateFilesAreNotFollowed: every file of the state tree a run opens
// is refused when a symbolic link or a named pipe stands in its place:
// STATE_INVALID (78), a message naming the file and the fix, the link's
// target unchanged, and no hang on a pipe. section.log and not_mine.yaml,
// a report and a cache, never stop a run: the record or the cache is lost,
// the target is left alone.
func TestStateFilesAreNotFollowed(t *testing.T) {
	const alias = "state/links"
	files := []struct {
		rel   string // under the thread folder, or from the state dir with "/"
		fatal bool   // the run ends STATE_INVALID
	}{
		{"thread.yaml", true},
		{"thread.lock", true},
		{"emissions.jsonl", true},
		{"logs/thread.log", true},
		{"/identity.yaml", true},
		{"/section.yaml", true},
		{"/slots/0.lock", true},
		{"/logs/section.log", false},
		{"/not_mine.yaml", false},
	}
	for _, kind := range []string{"a symbolic link", "a named pipe"} {
		for _, f := range files {
			if kind == "a named pipe" && f.rel == "/not_mine.yaml" {
				continue // a run only writes it, by rename: ls reads it (TestLsListsPastABadThread)
			}
			t.Run(strings.TrimPrefix(f.rel, "/")+" is "+kind, func(t *testing.T) {
				h := newHarness(t, false)
				dir := activeWithFiles(t, h, alias)
				s := h.setup()
				path := filepath.Join(dir, f.rel)
				switch {
				case f.rel == "/identity.yaml" || strings.HasPrefix(f.rel, "/slots/"):
					path = filepath.Join(s.StateDir, f.rel)
				case strings.HasPrefix(f.rel, "/"):
					path = filepath.Join(s.JobDir, f.rel)
				}
				old, _ := os.ReadFile(path)
				outside := filepath.Join(t.TempDir(), "outside")
				if err := os.WriteFile(outside, old, 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
				var err error
				if kind == "a symbolic link" {
					err = os.Symlink(outside, path)
				} else {
					err = syscall.Mkfifo(path, 0o600)
				}
				if err != nil {
					t.Fatal(err)
				}
				h.srv.PersonPost(alias, "second")
				h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "two"}}}})
				sum := runWithin(t, h, alias, 10*time.Second, unblockFIFO(path))
				if f.fatal {
					wantCode(t, sum, exit.Config, exit.CodeStateTreeInvalid)
					if !strings.Contains(sum.Error.Message, path) || !strings.Contains(sum.Error.Message, kind) || !strings.Contains(sum.Error.Message, "move it aside") {
						t.Errorf("message %q does not name %s as %s and the fix", sum.Error.Message, path, kind)
					}
				} else if sum.ExitCode != exit.OK {
					t.Errorf("exit %d error %+v: a %s that cannot be used must not stop the run", sum.ExitCode, sum.Error, f.rel)
				}
				if b, _ := os.ReadFile(outside); string(b) != string(old) {
					t.Errorf("the link's target changed from %q to %q", old, b)
				}
			})
		}
	}
}

// linkInPlaceOf moves the folder at path to movedTo and puts a symbolic
// link to target where it was.
func linkInPlaceOf(t testing.TB, path, movedTo, target string) {
	t.Helper()
	if err := os.Rename(path, movedTo); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
}

// otherUser is a uid that is not ours, and a folder it owns: as root, a
// fresh folder given to nobody (65534); as anyone else, / (root's).
func otherUser(t *testing.T) (uid int, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return 0, "/"
	}
	dir = filepath.Join(t.TempDir(), "theirs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	return 65534, dir
}

// TestStateTreeOfOthersIsRefused: a state tree another user owns (root
// included: a tree of a user's is not root's), a folder of it that group
// or others may write to, a folder of it that is a link, and a config.yaml
// others may write to (it names the executable bhw-run starts) are refused
// with 78 and a message saying how to fix the mode; nothing of the thread
// is written.
func TestStateTreeOfOthersIsRefused(t *testing.T) {
	const alias = "state/theirs"
	t.Run("state dir of another user", func(t *testing.T) {
		h := newHarness(t, false)
		uid, dir := otherUser(t)
		h.state = dir
		h.handOff(alias, "approval", "hi")
		sum := h.run(alias)
		wantCode(t, sum, exit.Config, exit.CodeInsecurePermissions)
		if !strings.Contains(sum.Error.Message, "owned by uid "+strconv.Itoa(uid)) || !strings.Contains(sum.Error.Message, "chown") {
			t.Errorf("message %q", sum.Error.Message)
		}
		if _, err := os.Stat(filepath.Join(dir, "jobs")); !os.IsNotExist(err) {
			t.Errorf("the run wrote into another user's tree: %v", err)
		}
	})
	for _, tc := range []struct {
		name string
		rel  string // from the job folder; "" the state dir
		mode os.FileMode
	}{
		{"group-writable state dir", "", 0o770},
		{"world-writable threads folder", "threads", 0o777},
		{"group-writable thread folder", "threads/state/theirs", 0o730},
		{"group-writable job folder", ".", 0o720},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, false)
			dir := activeWithFiles(t, h, alias)
			s := h.setup()
			target := s.StateDir
			if tc.rel != "" {
				target = filepath.Join(s.JobDir, tc.rel)
			}
			if err := os.Chmod(target, tc.mode); err != nil {
				t.Fatal(err)
			}
			before := tree(t, dir)
			h.srv.PersonPost(alias, "again")
			sum := h.run(alias)
			wantCode(t, sum, exit.Config, exit.CodeInsecurePermissions)
			if !strings.Contains(sum.Error.Message, target) || !strings.Contains(sum.Error.Message, "chmod go-w "+target) {
				t.Errorf("message %q does not say how to fix %s", sum.Error.Message, target)
			}
			sameTree(t, before, tree(t, dir))
		})
	}
	t.Run("threads folder is a link", func(t *testing.T) {
		h := newHarness(t, false)
		activeWithFiles(t, h, alias)
		s := h.setup()
		threads := filepath.Join(s.JobDir, "threads")
		moved := filepath.Join(t.TempDir(), "threads")
		linkInPlaceOf(t, threads, moved, moved)
		h.srv.PersonPost(alias, "again")
		sum := h.run(alias)
		wantCode(t, sum, exit.Config, exit.CodeStateTreeInvalid)
		if !strings.Contains(sum.Error.Message, threads+" is a symbolic link") {
			t.Errorf("message %q", sum.Error.Message)
		}
	})
	t.Run("thread folder of another user", func(t *testing.T) {
		if os.Geteuid() != 0 {
			// Only root can give a folder away; the state dir case above
			// covers the owner check for everyone.
			return
		}
		h := newHarness(t, false)
		dir := activeWithFiles(t, h, alias)
		if err := os.Chown(dir, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		h.srv.PersonPost(alias, "again")
		wantCode(t, h.run(alias), exit.Config, exit.CodeInsecurePermissions)
	})
	t.Run("config.yaml others may write to", func(t *testing.T) {
		h := newHarness(t, false)
		if err := os.Chmod(h.config, 0o666); err != nil {
			t.Fatal(err)
		}
		o := setup.Options{APIURL: h.srv.URL(), APIKey: "bhk_x", StateDir: h.state, ConfigPath: h.config,
			RevisionID: "rev_x", SessionID: "ses_x", Home: h.state, Adapters: testAdapters()}
		ee := resolveErr(t, o, alias)
		if ee.Exit != exit.Config || ee.Code != exit.CodeInsecurePermissions || !strings.Contains(ee.Message, "chmod go-w "+h.config) {
			t.Fatalf("%+v", ee)
		}
		// The state tree's own config.yaml, without --config, too.
		o.ConfigPath = ""
		if ee := resolveErr(t, o, alias); ee.Code != exit.CodeInsecurePermissions {
			t.Fatalf("%+v", ee)
		}
		if os.Geteuid() == 0 {
			if err := os.Chmod(h.config, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(h.config, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			if ee := resolveErr(t, o, alias); ee.Code != exit.CodeInsecurePermissions || !strings.Contains(ee.Message, "owned by uid 65534") {
				t.Fatalf("a config of another user: %+v", ee)
			}
		}
	})
	t.Run("config.yaml is a named pipe", func(t *testing.T) {
		h := newHarness(t, false)
		if err := os.Remove(h.config); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(h.config, 0o600); err != nil {
			t.Fatal(err)
		}
		o := setup.Options{APIURL: h.srv.URL(), APIKey: "bhk_x", StateDir: h.state, ConfigPath: h.config,
			RevisionID: "rev_x", SessionID: "ses_x", Home: h.state, Adapters: testAdapters()}
		done := make(chan *exit.Error, 1)
		go func() { done <- resolveErr(t, o, alias) }()
		select {
		case ee := <-done:
			if ee.Code != exit.CodeInvalidConfig || !strings.Contains(ee.Message, "not a regular file") {
				t.Fatalf("%+v", ee)
			}
		case <-time.After(10 * time.Second):
			unblockFIFO(h.config)()
			t.Fatal("reading a named pipe as config.yaml blocked")
		}
	})
}
