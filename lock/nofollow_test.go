package lock

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/statefile"
)

// TestLockFilesAreNotFollowed: a symbolic link, a named pipe or a folder
// where a lock file belongs is refused, quickly, as not a regular file; a
// link's target is left as it was (the holder write used to truncate it),
// and a pipe never blocks the open.
func TestLockFilesAreNotFollowed(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "precious")
	const text = "not yours to truncate\n"
	if err := os.WriteFile(outside, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	plant := map[string]func(path string) error{
		"a symbolic link": func(p string) error { return os.Symlink(outside, p) },
		"a named pipe":    func(p string) error { return syscall.Mkfifo(p, 0o600) },
		"a directory":     func(p string) error { return os.Mkdir(p, 0o700) },
	}
	// Each way a lock file is taken, with the file it takes in dir.
	takers := []struct {
		name, file string
		take       func(dir string) error
	}{
		{"the thread lock", "thread.lock", func(dir string) error {
			_, err := Acquire(context.Background(), filepath.Join(dir, "thread.lock"), 0)
			return err
		}},
		{"a slot", "0.lock", func(dir string) error { _, err := TrySlot(dir, 1); return err }},
		{"the section lock", "section.lock", func(dir string) error {
			return WithLock(context.Background(), filepath.Join(dir, "section.lock"), func() error { return nil })
		}},
		{"the probe", "thread.lock", func(dir string) error { _, err := Held(filepath.Join(dir, "thread.lock")); return err }},
	}
	for what, mk := range plant {
		for _, tk := range takers {
			t.Run(tk.name+" on "+what, func(t *testing.T) {
				dir := t.TempDir()
				path := filepath.Join(dir, tk.file)
				if err := mk(path); err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() { done <- tk.take(dir) }()
				var err error
				select {
				case err = <-done:
				case <-time.After(10 * time.Second):
					// Unblock the open so the goroutine can end, then fail.
					if f, oerr := os.OpenFile(path, os.O_RDWR, 0); oerr == nil {
						f.Close()
					}
					t.Fatalf("taking %s blocked on %s", tk.name, what)
				}
				var nr *statefile.NotRegularError
				if !errors.As(err, &nr) || nr.What != what || nr.Path != path {
					t.Fatalf("error %v, want a NotRegularError naming %s as %s", err, path, what)
				}
				if b, _ := os.ReadFile(outside); string(b) != text {
					t.Fatalf("the link's target now holds %q", b)
				}
			})
		}
	}
}
