package envelope

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Files of the state tree are opened with OpenFile: never through a
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

// OpenFile is os.OpenFile for a file of the state tree: flag gets
// O_NOFOLLOW and O_NONBLOCK (which changes nothing for a regular file),
// and anything but a regular file is a *NotRegularError. A missing file is
// fs.ErrNotExist, as with os.OpenFile.
func OpenFile(path string, flag int, perm os.FileMode) (*os.File, error) {
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

// ReadFile reads a whole file of the state tree through OpenFile.
func ReadFile(path string) ([]byte, error) {
	f, err := OpenFile(path, os.O_RDONLY, 0)
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
