package antigravity

// The work folder's .agents/hooks.json, where agy finds its PreToolUse
// hook (it reads hooks from the workspace root, the --add-dir folder, and
// nowhere else). The file may be the operator's own, and several threads
// may run in one folder at once, each a bhw-run process of its own, so:
//
//   - the hook's entry (key blobhub_gate, as blobhub-worker names it) is
//     merged into the file, never written over it, and the file is put back
//     byte for byte when the last run in the folder leaves — removed when
//     there was none, and .agents/ with it only if it was made for the hook
//     and is empty;
//   - what to put back is saved in the state tree before the file is
//     touched, and each run holding the hook holds a lock of its own there:
//     a holder killed with -9 holds nothing (the kernel drops its lock), so
//     the next run in the folder, finding no live holder and a saved
//     original, puts it back first;
//   - a folder blobhub-worker prepared holds the worker's entry under the
//     same key: it is part of the original, replaced by bhw-run's for the
//     run and put back after. Both hooks speak the same protocol over the
//     same variable, so either one serves the other's turns.
//
// The agent can write the work folder, hooks.json included: a hook it
// removes is not contacted, which the never-contacted rule reports.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/blobhub/bhw-run/statefile"
)

// HookKey is the hook's key in hooks.json, blobhub-worker's own.
const HookKey = "blobhub_gate"

// hookTimeout is the hook's timeout in seconds, the worker's: a call put
// to a person waits for no answer here (it parks), but a slow machine may.
const hookTimeout = 600

// lockWait bounds the wait for another run's short hold of the folder's
// record.
const lockWait = 30 * time.Second

// HookConfigError is a hooks.json bhw-run will not merge into: not JSON,
// or not an object. The run fails without touching it.
type HookConfigError struct {
	Path   string
	Reason string
}

func (e *HookConfigError) Error() string {
	return fmt.Sprintf("%s %s; fix or remove it (bhw-run merges its hook into it and restores it after the run)", e.Path, e.Reason)
}

// hookCommand is the shell command agy runs for the hook: bhw-run's hidden
// subcommand when its binary is still there, else an allow, so a file left
// behind by an uninstalled bhw-run never blocks the operator's own agy. A
// hook that fails (a crash, a signal) makes agy refuse the call.
func hookCommand(program string) string {
	q := shellQuote(program)
	return "if [ -x " + q + " ]; then exec " + q + " " + HookArg + "; else echo '{\"decision\":\"allow\"}'; fi"
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// hookEntry is the hook's entry in hooks.json. The inner key is hooks
// (agy parses handlers, which its documentation shows, and ignores it).
func hookEntry(program string) map[string]any {
	return map[string]any{
		"enabled": true,
		"PreToolUse": []any{map[string]any{"matcher": "", "hooks": []any{
			map[string]any{"type": "command", "command": hookCommand(program), "timeout": hookTimeout}}}},
	}
}

// saved is what the record keeps of a folder before the hook went in.
type saved struct {
	Folder     string      `json:"folder"`
	Existed    bool        `json:"existed"`
	Original   []byte      `json:"original,omitempty"`
	Mode       fs.FileMode `json:"mode,omitempty"`
	CreatedDir bool        `json:"created_dir,omitempty"`
}

// hooks is one work folder's hook record in the state tree.
type hooks struct {
	folder  string // the work folder, resolved
	file    string // its .agents/hooks.json
	record  string // the record's folder
	program string // the hook's program (bhw-run)
}

func newHooks(recordRoot, workFolder, program string) (*hooks, error) {
	abs, err := filepath.Abs(workFolder)
	if err != nil {
		return nil, err
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	sum := sha256.Sum256([]byte(abs))
	return &hooks{folder: abs, file: filepath.Join(abs, ".agents", "hooks.json"),
		record: filepath.Join(recordRoot, hex.EncodeToString(sum[:8])), program: program}, nil
}

// hold is one run's hold on the folder's hook; release gives it back.
type hold struct {
	h *hooks
	f *os.File
}

// acquire installs the hook, or joins the runs that hold it, having put
// back first what a killed run left.
func (h *hooks) acquire() (*hold, error) {
	var out *hold
	err := h.locked(func(live int) error {
		if live == 0 {
			if err := h.restore(); err != nil {
				return err
			}
		}
		if err := h.install(); err != nil {
			return err
		}
		f, err := h.newHolder()
		if err != nil {
			return err
		}
		out = &hold{h: h, f: f}
		return nil
	})
	return out, err
}

// release drops this run's hold; the last one out puts the folder back.
func (o *hold) release() error {
	if o == nil || o.f == nil {
		return nil
	}
	return o.h.locked(func(int) error {
		name := o.f.Name()
		_ = o.f.Close()
		_ = os.Remove(name)
		o.f = nil
		live, err := o.h.liveHolders()
		if err != nil || live > 0 {
			return err
		}
		return o.h.restore()
	})
}

// recoverLeft puts back what a killed run left when no run holds the
// folder: an autonomous run installs no hook but leaves none behind either.
func (h *hooks) recoverLeft() error {
	if _, err := os.Stat(filepath.Join(h.record, "saved.json")); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return h.locked(func(live int) error {
		if live > 0 {
			return nil
		}
		return h.restore()
	})
}

// locked runs fn under the record's lock with the number of live holders.
func (h *hooks) locked(fn func(live int) error) error {
	if err := os.MkdirAll(filepath.Join(h.record, "holders"), 0o700); err != nil {
		return fmt.Errorf("the hook's record %s: %w", h.record, err)
	}
	f, err := os.OpenFile(filepath.Join(h.record, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	deadline := time.Now().Add(lockWait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			return fmt.Errorf("the hook's record %s stays locked (%v); another run in %s holds it: retry later", h.record, err, h.folder)
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }()
	live, err := h.liveHolders()
	if err != nil {
		return err
	}
	return fn(live)
}

// liveHolders counts the holders whose lock is held, removing the files of
// those that died.
func (h *hooks) liveHolders() (int, error) {
	dir := filepath.Join(h.record, "holders")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	live := 0
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			_ = os.Remove(p) // its holder is gone
		} else {
			live++
		}
		f.Close()
	}
	return live, nil
}

func (h *hooks) newHolder() (*os.File, error) {
	name := filepath.Join(h.record, "holders", strconv.Itoa(os.Getpid())+"-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		_ = os.Remove(name)
		return nil, err
	}
	return f, nil
}

// install merges the hook's entry into hooks.json, saving the original
// first when no run holds it yet.
func (h *hooks) install() error {
	cur, mode, existed, err := readHooks(h.file)
	if err != nil {
		return err
	}
	doc := map[string]json.RawMessage{}
	if existed {
		if err := json.Unmarshal(cur, &doc); err != nil || doc == nil {
			why := "is not a JSON object"
			if err != nil {
				why = "is not valid JSON: " + err.Error()
			}
			return &HookConfigError{Path: h.file, Reason: why}
		}
	}
	entry, _ := json.Marshal(hookEntry(h.program))
	if existed && bytes.Equal(compact(doc[HookKey]), compact(entry)) {
		return nil // the runs holding it installed it
	}
	recordFile := filepath.Join(h.record, "saved.json")
	if _, err := os.Stat(recordFile); errors.Is(err, fs.ErrNotExist) {
		_, dirErr := os.Stat(filepath.Dir(h.file))
		s := saved{Folder: h.folder, Existed: existed, Original: cur, Mode: mode, CreatedDir: errors.Is(dirErr, fs.ErrNotExist)}
		b, _ := json.Marshal(s)
		if err := statefile.WriteAtomic(recordFile, b, 0o600); err != nil {
			return fmt.Errorf("saving %s before adding the hook: %w", h.file, err)
		}
	}
	doc[HookKey] = entry
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(h.file), 0o755); err != nil {
		return fmt.Errorf("adding the hook to %s: %w", h.file, err)
	}
	if mode == 0 {
		mode = 0o644
	}
	if err := statefile.WriteAtomic(h.file, append(out, '\n'), mode); err != nil {
		return fmt.Errorf("adding the hook to %s: %w", h.file, err)
	}
	return nil
}

// restore puts back what the record saved, and drops the record. A file it
// cannot write keeps the record, for the next run to try again.
func (h *hooks) restore() error {
	recordFile := filepath.Join(h.record, "saved.json")
	b, err := os.ReadFile(recordFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var s saved
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("the hook's record %s does not read (%v); put %s back by hand and remove the record", recordFile, err, h.file)
	}
	if s.Existed {
		err = statefile.WriteAtomic(h.file, s.Original, cmpMode(s.Mode))
	} else if err = os.Remove(h.file); errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("putting back %s: %w; the next run in the folder tries again", h.file, err)
	}
	if s.CreatedDir {
		_ = os.Remove(filepath.Dir(h.file)) // only when empty
	}
	return os.Remove(recordFile)
}

func cmpMode(m fs.FileMode) fs.FileMode {
	if m == 0 {
		return 0o644
	}
	return m
}

// maxHooksFile bounds the hooks.json read.
const maxHooksFile = 4 << 20

func readHooks(path string) (b []byte, mode fs.FileMode, existed bool, err error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, false, nil
	}
	if err != nil {
		return nil, 0, false, err
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, false, &HookConfigError{Path: path, Reason: "is not a regular file"}
	}
	if fi.Size() > maxHooksFile {
		return nil, 0, false, &HookConfigError{Path: path, Reason: fmt.Sprintf("is larger than %d bytes", maxHooksFile)}
	}
	b, err = os.ReadFile(path)
	return b, fi.Mode().Perm(), true, err
}

func compact(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}
