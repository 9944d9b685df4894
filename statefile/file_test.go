package statefile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// linkToKept writes "keep" to dir/target with mode perm and makes dir/name
// a symbolic link to it; it returns both paths.
func linkToKept(t *testing.T, dir, name string, perm os.FileMode) (target, link string) {
	t.Helper()
	target, link = filepath.Join(dir, "target"), filepath.Join(dir, name)
	if err := os.WriteFile(target, []byte("keep"), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	return target, link
}

// TestOpenRefusesWhatIsNotARegularFile: a link, a folder and a named pipe
// are a *NotRegularError naming what is there, opened for reading or
// writing, and the pipe does not block open(2); a missing file is
// fs.ErrNotExist; a regular file opens.
func TestOpenRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	target, link := linkToKept(t, dir, "link", 0o600)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for path, what := range map[string]string{link: "a symbolic link", dir: "a directory", fifo: "a named pipe"} {
		for _, flag := range []int{os.O_RDONLY, os.O_RDWR | os.O_CREATE} {
			f, err := Open(path, flag, 0o600)
			var nr *NotRegularError
			if !errors.As(err, &nr) || nr.What != what || !strings.Contains(err.Error(), path) {
				if f != nil {
					f.Close()
				}
				t.Errorf("Open(%s, %#o) = %v, want a *NotRegularError saying %s", path, flag, err, what)
			}
		}
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("the link's target was changed: %q", b)
	}
	if _, err := Read(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v, want fs.ErrNotExist", err)
	}
	if b, err := Read(target); err != nil || string(b) != "keep" {
		t.Errorf("Read(regular) = %q, %v", b, err)
	}
}

// TestWriteAtomic: the file gets the bytes and the mode, a link at the
// path is replaced rather than written through, and no temp file is left.
func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	target, path := linkToKept(t, dir, "state.yaml", 0o644)
	if err := WriteAtomic(path, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Fatalf("after WriteAtomic: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Errorf("the file holds %q", b)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("the link's target was written through: %q", b)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("left behind: %v", entries)
	}
}
