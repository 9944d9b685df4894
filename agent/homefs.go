package agent

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// An agent may write its own home (and its work folder, its TMPDIR, the
// machine owner's confine.writable): what bhw-run, unconfined, reads or
// writes there may have been put in its way — a link to ~/.blobhub that a
// write would follow, a named pipe that an open would block on, a sparse
// file of a gigabyte that a read would allocate. So bhw-run touches such a
// folder only through these functions: every name below the folder is
// opened from its parent's descriptor with O_NOFOLLOW and O_NONBLOCK, a
// file is written by a new temp file and a rename (which replaces a link
// or a pipe, never follows it), and a read is bounded.

// MaxAgentFile bounds what ReadAgentFile reads of a file in an agent's
// folder: the login and config files read there are a few KiB.
const MaxAgentFile = 1 << 20

// openDirIn opens dir (its links resolved: the folder itself is the
// machine owner's or bhw-run's, not the agent's to move), then each folder
// of rel below it without following a link, creating those missing when
// create is set. The caller closes the result.
func openDirIn(dir, rel string, create bool) (int, error) {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	path := dir
	for _, name := range strings.Split(filepath.Clean(rel), "/") {
		if name == "." || name == "" {
			continue
		}
		if name == ".." {
			unix.Close(fd)
			return -1, fmt.Errorf("%s: a path inside the agent's folder may not climb out of it", rel)
		}
		path = filepath.Join(path, name)
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) && create {
			if err = unix.Mkdirat(fd, name, 0o700); err == nil || errors.Is(err, unix.EEXIST) {
				next, err = unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
			}
		}
		unix.Close(fd)
		if err != nil {
			if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
				err = errors.New("not a folder (a link or a file stands there); bhw-run follows nothing in an agent's folder")
			}
			return -1, &os.PathError{Op: "open", Path: path, Err: err}
		}
		fd = next
	}
	return fd, nil
}

// MkdirIn makes the folders of rel below dir (0700), none through a link.
func MkdirIn(dir, rel string) error {
	fd, err := openDirIn(dir, rel, true)
	if err == nil {
		unix.Close(fd)
	}
	return err
}

// WriteFileIn writes b to rel below dir, an agent-writable folder: the
// folders on the way made (0700) and opened without following a link, a
// new temp file (O_EXCL, 0600) written and synced, then renamed over rel,
// which replaces whatever stands there (a link, a pipe) without opening
// it. An agent starting meanwhile never reads half a file.
func WriteFileIn(dir, rel string, b []byte) error {
	dfd, err := openDirIn(dir, filepath.Dir(rel), true)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	base := filepath.Base(rel)
	var tmp string
	var fd int
	for i := 0; ; i++ {
		tmp = fmt.Sprintf(".%s.tmp-%d-%d", base, os.Getpid(), i)
		fd, err = unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o600)
		if !errors.Is(err, unix.EEXIST) || i > 100 {
			break
		}
	}
	path := filepath.Join(dir, rel)
	if err != nil {
		return &os.PathError{Op: "create", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dfd, tmp, dfd, base)
	}
	if err != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return &os.PathError{Op: "write", Path: path, Err: err}
	}
	return nil
}

// ReadAgentFile reads rel below dir, a folder an agent may write, at most
// MaxAgentFile bytes of it: each name opened with O_NOFOLLOW and
// O_NONBLOCK from its folder's descriptor (so neither a link nor a pipe
// is followed or waited on), and only when it is a regular file of that
// size or less.
func ReadAgentFile(dir, rel string) ([]byte, error) {
	path := filepath.Join(dir, rel)
	dfd, err := openDirIn(dir, filepath.Dir(rel), false)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Openat(dfd, filepath.Base(rel), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	unix.Close(dfd)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			err = errors.New("a link; bhw-run follows nothing in an agent's folder")
		}
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	switch {
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, fi.Mode().Type())
	case fi.Size() > MaxAgentFile:
		return nil, fmt.Errorf("%s is %d bytes, more than the %d read of a file in an agent's folder", path, fi.Size(), MaxAgentFile)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxAgentFile+1))
	if err == nil && len(b) > MaxAgentFile {
		return nil, fmt.Errorf("%s grew past %d bytes while read", path, MaxAgentFile)
	}
	return b, err
}
