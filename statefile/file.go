// Package statefile is how bhw-run opens and writes a file of its state
// tree: never through a link, never blocking on a pipe, and, for a file
// that must survive a crash, atomically. It is a leaf: the thread's
// records (envelope), the locks, the local store and the Codex preflight
// all open their files through it without importing each other.
package statefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Files of the state tree are opened with Open: never through a
// symbolic link in their last component (O_NOFOLLOW), never blocking in
// open(2) on a named pipe or a device (O_NONBLOCK), and only when they are
// regular files. A link at thread.lock would otherwise get the file it
// points to truncated by the holder's write, a link at a log would get it
// appended to, and a named pipe would hang the run in open(2), out of reach
// of its signals. The folders above the file are checked by the run (the
// state tree's owner and modes); this guards the last step.

// NotRegularError is a state file that is something else than a regular
// file: a symbolic link, a directory, a named pipe, a socket or a device.
type NotRegularError struct {
	Path string
	What string // "a symbolic link", "a directory", …
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is %s, not a regular file; bhw-run follows no link and opens nothing but regular files in its state tree: replace it with the file itself or move it aside", e.Path, e.What)
}

// Open is os.OpenFile for a file of the state tree: flag gets
// O_NOFOLLOW and O_NONBLOCK (which changes nothing for a regular file),
// and anything but a regular file is a *NotRegularError. A missing file is
// fs.ErrNotExist, as with os.OpenFile.
func Open(path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, perm)
	if err != nil {
		// ELOOP: the last component is a link; EISDIR: a folder opened for
		// writing; ENXIO: a pipe without a reader or a socket opened for
		// writing; EOPNOTSUPP: a socket on macOS. Name what is there
		// instead of the errno.
		if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENXIO) || errors.Is(err, syscall.EOPNOTSUPP) {
			if fi, lerr := os.Lstat(path); lerr == nil && !fi.Mode().IsRegular() {
				return nil, &NotRegularError{Path: path, What: fileKind(fi.Mode())}
			}
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, &NotRegularError{Path: path, What: fileKind(fi.Mode())}
	}
	return f, nil
}

// Read reads a whole file of the state tree through Open.
func Read(path string) ([]byte, error) {
	f, err := Open(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// fileKind names what a mode that is not a regular file's is.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file (" + m.Type().String() + ")"
}

// WriteAtomic writes b to path through a temp file in the same folder:
// write, fsync, close, rename, fsync the folder. A reader or a crash sees the
// old bytes or the new ones, never a mix. It is the one way bhw-run writes a
// file that must survive a crash (thread.yaml, section.yaml, identity.yaml,
// the local store's objects). The temp file's name starts with '.'.
func WriteAtomic(path string, b []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(path)
	// CreateTemp opens with O_CREATE|O_EXCL, which never follows a link
	// (open(2)), and the rename replaces whatever is at path, a link
	// included, without following it: neither step writes through a link.
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	if err = f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err = f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err = f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	// Some file systems refuse fsync on a directory; the rename stands.
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return err
	}
	return nil
}
