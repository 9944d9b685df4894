package setup

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/statefile"
)

// The state tree is bhw-run's to trust: its records say which agent runs
// where, and config.yaml names the executable bhw-run starts. So every
// folder a run walks through, from the state dir down, must belong to the
// user bhw-run runs as (root included: a tree of another user's is not
// root's to trust either) and be writable by nobody else, and none may be a
// symbolic link (only the state dir itself may be one: a tree kept on
// another volume). A folder that fails is refused, never repaired, since
// whoever could write to it may have left something in it; the one repair
// is the state dir's read bits, which bhw-run has always taken away.

// WorkerTree is ~/.blobhub-worker, the folder every profile's state tree
// lies in (profiles/<name>), with the v1 credentials file and the
// daemon's records: whoever writes any of it changes what some profile's
// next run reads and starts (its config.yaml names executables and turns
// the confinement off). No work folder may be, contain or lie in it, and
// no agent may read or write it, whichever profile runs the agent.
func WorkerTree(home string) string {
	return filepath.Join(home, ".blobhub-worker")
}

// ensureDir makes sure dir, the state dir or a folder under it, exists
// (created 0700 when missing) with every folder between, each checked as
// above.
func (s *Setup) EnsureDir(dir string) error { return s.walkState(dir, true) }

// checkDir is ensureDir for a reader that creates nothing (ls): a missing
// folder is fs.ErrNotExist.
func (s *Setup) CheckDir(dir string) error { return s.walkState(dir, false) }

func (s *Setup) walkState(dir string, create bool) error {
	root := filepath.Clean(s.StateDir)
	rel, err := filepath.Rel(root, filepath.Clean(dir))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("%s is not inside the state tree %s", dir, root)
	}
	fi, err := os.Stat(root)
	if errors.Is(err, fs.ErrNotExist) && create {
		if err := os.MkdirAll(root, 0o700); err != nil {
			return exit.Errorf(exit.CodeStateTreeInvalid, "cannot create the state tree %s: %v; fix its parent folder or pick another --state-dir", root, err)
		}
		fi, err = os.Stat(root)
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return exit.Errorf(exit.CodeStateTreeInvalid, "cannot read the state tree %s: %v", root, err)
	}
	if err := TrustedDir(root, fi); err != nil {
		return err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(root, 0o700); err != nil {
			return exit.Errorf(exit.CodeStateTreeInvalid, "cannot make the state tree %s private (mode 0700): %v; run chmod 700 %s", root, err, root)
		}
	}
	if rel == "." {
		return nil
	}
	path := root
	for _, name := range strings.Split(rel, string(filepath.Separator)) {
		path = filepath.Join(path, name)
		fi, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) && create {
			if err := os.Mkdir(path, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return exit.Errorf(exit.CodeStateTreeInvalid, "cannot create %s: %v; fix the state tree", path, err)
			}
			fi, err = os.Lstat(path)
		}
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return err
			}
			return exit.Errorf(exit.CodeStateTreeInvalid, "cannot read %s: %v; fix the state tree", path, err)
		}
		if !fi.IsDir() {
			what := "not a folder"
			if fi.Mode()&fs.ModeSymlink != 0 {
				what = "a symbolic link"
			}
			return exit.Errorf(exit.CodeStateTreeInvalid, "%s is %s, where the state tree has a folder of its own; bhw-run follows no link inside its state tree: replace it with the folder itself or move it aside", path, what)
		}
		if err := TrustedDir(path, fi); err != nil {
			return err
		}
	}
	return nil
}

// TrustedDir refuses a folder of the state tree that another user owns or
// that group or others may write to.
func TrustedDir(path string, fi fs.FileInfo) error {
	if err := ownedByUs(path, fi, false); err != nil {
		return err
	}
	if m := fi.Mode().Perm(); m&0o022 != 0 {
		return exit.Errorf(exit.CodeInsecurePermissions, "the state tree folder %s has mode %04o: group or others may write to it, and so change what bhw-run reads and starts; check what is in it, then run chmod go-w %s", path, m, path)
	}
	return nil
}

// ownedByUs refuses a file or folder whose owner is not the user bhw-run
// runs as (orRoot: root may own it too, as it may own a config file).
func ownedByUs(path string, fi fs.FileInfo, orRoot bool) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	me := os.Geteuid()
	if int(st.Uid) == me || orRoot && st.Uid == 0 {
		return nil
	}
	return exit.Errorf(exit.CodeInsecurePermissions, "%s is owned by uid %d, not by uid %d that runs bhw-run; another user could change what bhw-run reads and starts: run bhw-run as its owner, or chown -R %d %s once you have checked it", path, st.Uid, me, me, path)
}

// readConfigFile reads config.yaml, which names the executables bhw-run
// starts: refused when group or others may write to it or another user
// than ours or root owns it. It may be a link (a Kubernetes ConfigMap is
// one), but must lead to a regular file; a named pipe is refused without
// blocking.
func readConfigFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, exit.Errorf(exit.CodeInvalidConfig, "config %s is not a regular file (%s); point --config at the file itself", path, fi.Mode().Type())
	}
	if err := ownedByUs(path, fi, true); err != nil {
		return nil, err
	}
	if m := fi.Mode().Perm(); m&0o022 != 0 {
		return nil, exit.Errorf(exit.CodeInsecurePermissions, "config %s has mode %04o: group or others may write to it, and it names the executables bhw-run starts; run chmod go-w %s", path, m, path)
	}
	return io.ReadAll(f)
}

// TestHookStateWrite, when a test sets it, is asked before every write of
// a state file (thread.yaml, artifacts.yaml, section.yaml, identity.yaml,
// not_mine.yaml, each journal record) and its error stands for the write's: a full disk
// cannot be made without privileges. Always nil in production.
var TestHookStateWrite func(path string) error

// WriteStateFile writes a state file atomically (statefile.WriteAtomic).
// A failure is STATE_INVALID: a full disk or a read-only folder is the
// machine's to fix, and no later run mends it by itself.
func WriteStateFile(path string, b []byte) error {
	var err error
	if TestHookStateWrite != nil {
		err = TestHookStateWrite(path)
	}
	if err == nil {
		err = statefile.WriteAtomic(path, b, 0o600)
	}
	if err != nil {
		return StateWriteError(path, err)
	}
	return nil
}

// StateWriteError is the error of a state file that cannot be written.
func StateWriteError(path string, err error) error {
	return exit.Errorf(exit.CodeStateTreeInvalid, "cannot write %s: %v; the state tree must be writable (a full disk? a read-only folder?): fix it and run again, nothing is lost", path, err)
}

// IsStateInvalid reports whether err is a STATE_INVALID exit.
func IsStateInvalid(err error) bool {
	var ee *exit.Error
	return errors.As(err, &ee) && ee.Code == exit.CodeStateTreeInvalid
}
