// Package outbox is the file-system half of artifacts (docs/state.md): it
// creates a thread's
// outbox folder inside the work folder and reads what the agent left there,
// never following a symbolic link and never changing a file it did not
// create. It knows nothing of BlobHub; run publishes what Scan returns.
package outbox

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// GitIgnore is the file Create writes in a folder it created, so the
// outbox never shows in `git status` of the work folder.
const GitIgnore = ".gitignore"

// maxDepth bounds the walk: a hostile tree cannot exhaust file descriptors.
const maxDepth = 32

// Skip reasons.
const (
	ReasonSymlink    = "symlink"
	ReasonHardlink   = "hardlink"
	ReasonTooLarge   = "too large"
	ReasonNotRegular = "not a regular file"
	ReasonTooDeep    = "too deep"
	ReasonUnreadable = "unreadable"
	ReasonOutside    = "a link out of the folder"
)

// File is one regular file of the outbox, hashed (and, by Read, read)
// from one open file descriptor. Scan only hashes: its files carry no
// Data and no Encoding, so what it costs does not grow with the files'
// bytes; Read reads one file's bytes when they are uploaded.
type File struct {
	Path      string // relative to the outbox, slash-separated
	Size      int64
	SHA256    string // hex
	Data      []byte // Read only
	MediaType string
	Encoding  string // "utf-8" or "base64"; Read only
}

// Name is the file's base name.
func (f File) Name() string { return path.Base(f.Path) }

// EncodedData is Data as it travels in the artifact value: the text itself
// for utf-8, standard base64 otherwise.
func (f File) EncodedData() string {
	if f.Encoding == "utf-8" {
		return string(f.Data)
	}
	return base64.StdEncoding.EncodeToString(f.Data)
}

// Skip is a file Scan would not publish, and why. ReadInside returns one
// as its error.
type Skip struct {
	Path   string
	Reason string
}

func (s Skip) Error() string { return s.Path + ": " + s.Reason }

// SourceError is a bad artifacts.source or an outbox that leaves the work
// folder.
type SourceError struct {
	Source string
	Why    string
}

func (e *SourceError) Error() string {
	return fmt.Sprintf("artifacts.source %q %s", e.Source, e.Why)
}

// ValidateSource checks artifacts.source without touching the disk: a
// relative, clean, strict subfolder of the work folder, not under .git
// (the checklist's step 5).
func ValidateSource(source string) error {
	bad := func(why string) error { return &SourceError{Source: source, Why: why} }
	switch {
	case source == "" || filepath.IsAbs(source):
		return bad("must be a relative path")
	case filepath.Clean(source) != source || strings.Contains(source, "\\"):
		return bad("is not clean")
	case source == "." || source == ".." || strings.HasPrefix(source, "../"):
		return bad("must be a strict subfolder of the work folder")
	case source == ".git" || strings.HasPrefix(source, ".git/"):
		return bad("must not be under .git")
	}
	for _, r := range source {
		if r == 0 {
			return bad("contains a NUL byte")
		}
	}
	return nil
}

// CheckSource is the activation check of artifacts.source (the checklist's
// step 5): ValidateSource, then the symlink check of the longest existing
// prefix.
func CheckSource(workFolder, source string) error {
	_, err := checkInside(workFolder, source)
	return err
}

// checkInside re-checks, after resolving symbolic links, that the longest
// existing prefix of workFolder/source stays strictly inside the work folder
// and out of its .git: the folder may have changed since
// the checklist ran.
func checkInside(workFolder, source string) (workReal string, err error) {
	if err := ValidateSource(source); err != nil {
		return "", err
	}
	workReal, err = filepath.EvalSymlinks(workFolder)
	if err != nil {
		return "", fmt.Errorf("work folder %s: %w", workFolder, err)
	}
	probe, rest := filepath.Join(workReal, source), ""
	for probe != workReal {
		real, err := filepath.EvalSymlinks(probe)
		if err == nil {
			full := filepath.Join(real, rest)
			rel, rerr := filepath.Rel(workReal, full)
			if rerr != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
				return "", &SourceError{Source: source, Why: "leaves the work folder through a symbolic link"}
			}
			if rel == ".git" || strings.HasPrefix(rel, ".git/") {
				return "", &SourceError{Source: source, Why: "resolves under .git"}
			}
			return workReal, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("outbox %s: %w", probe, err)
		}
		rest = filepath.Join(filepath.Base(probe), rest)
		probe = filepath.Dir(probe)
	}
	return workReal, nil
}

// Create makes <workFolder>/<source> with its parents. Only when it creates
// the outbox folder itself does it write a .gitignore holding "*" in it;
// createdByUs reports that. It is idempotent and never deletes, moves or
// rewrites a file that is already there.
//
// The folder appears complete or not at all: it is built under a temporary
// name next to its final place and renamed without replacing anything, so
// a kill between the mkdir and the .gitignore cannot leave an outbox that
// git would see.
func Create(workFolder, source string) (createdByUs bool, err error) {
	workReal, err := checkInside(workFolder, source)
	if err != nil {
		return false, err
	}
	dir := filepath.Join(workReal, source)
	if fi, err := os.Lstat(dir); err == nil {
		if fi.Mode()&fs.ModeSymlink == 0 && !fi.IsDir() {
			return false, &SourceError{Source: source, Why: "exists and is not a folder"}
		}
		return false, nil
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return false, fmt.Errorf("create the outbox's parent: %w", err)
	}
	// MkdirAll follows links: check again that what it walked stays inside.
	if _, err := checkInside(workFolder, source); err != nil {
		return false, err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".tmp-")
	if err != nil {
		return false, fmt.Errorf("create the outbox: %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		_ = os.RemoveAll(tmp)
		return false, err
	}
	if err := os.WriteFile(filepath.Join(tmp, GitIgnore), []byte("*\n"), 0o644); err != nil {
		_ = os.RemoveAll(tmp)
		return false, fmt.Errorf("write the outbox's .gitignore: %w", err)
	}
	switch err := renameNoReplace(tmp, dir); {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.EEXIST):
		// Someone made it meanwhile: it is theirs.
		_ = os.RemoveAll(tmp)
		return false, nil
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.ENOTSUP):
		// No no-replace rename on this file system (Linux says EINVAL,
		// macOS ENOTSUP): mkdir is the atomic test.
		_ = os.RemoveAll(tmp)
		if err := os.Mkdir(dir, 0o755); errors.Is(err, fs.ErrExist) {
			return false, nil
		} else if err != nil {
			return false, fmt.Errorf("create the outbox: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, GitIgnore), []byte("*\n"), 0o644); err != nil {
			return true, fmt.Errorf("write the outbox's .gitignore: %w", err)
		}
		return true, nil
	default:
		_ = os.RemoveAll(tmp)
		return false, fmt.Errorf("create the outbox: %w", err)
	}
}

// testHookOpenRoot, when set by a test, runs between the path checks of
// openRoot and its opens, where a swap of a folder would race them.
var testHookOpenRoot func()

// openRoot opens the outbox folder without following a link anywhere on the
// way: the work folder is opened by its resolved path, then every folder
// below it with openat and O_NOFOLLOW, so a folder swapped for a link after
// the checks is refused instead of followed out of the work folder. A parent
// that is a link staying inside the work folder (CheckSource allows it) is
// walked by its resolved path; the outbox folder itself must not be a link.
func openRoot(workFolder, source string) (int, error) {
	workReal, err := checkInside(workFolder, source)
	if err != nil {
		return -1, err
	}
	var segs []string
	if parent := filepath.Dir(source); parent != "." {
		real, err := filepath.EvalSymlinks(filepath.Join(workReal, parent))
		if err != nil {
			return -1, fmt.Errorf("outbox %s: %w", filepath.Join(workReal, parent), err)
		}
		rel, err := filepath.Rel(workReal, real)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
			return -1, &SourceError{Source: source, Why: "leaves the work folder through a symbolic link"}
		}
		if rel != "." {
			segs = strings.Split(rel, string(filepath.Separator))
		}
		if len(segs) > 0 && segs[0] == ".git" {
			return -1, &SourceError{Source: source, Why: "resolves under .git"}
		}
	}
	segs = append(segs, filepath.Base(source))
	if testHookOpenRoot != nil {
		testHookOpenRoot()
	}
	const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Open(workReal, dirFlags, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: workReal, Err: err}
	}
	at := workReal
	for _, seg := range segs {
		at = filepath.Join(at, seg)
		next, err := unix.Openat(fd, seg, dirFlags, 0)
		unix.Close(fd)
		switch {
		case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
			// O_NOFOLLOW on a symlink is ELOOP: a root or a parent swapped
			// for a link is refused.
			return -1, &SourceError{Source: source, Why: "is a symbolic link or not a folder, or lies under one; refusing to read it"}
		case err != nil:
			return -1, &os.PathError{Op: "open", Path: at, Err: err}
		}
		fd = next
	}
	return fd, nil
}

// Scan walks the outbox and returns its regular files that are new or
// changed against published (relative path → sha256), sorted by path,
// and the files it will not publish. It never follows a link: every file
// is opened relative to its folder's descriptor with O_NOFOLLOW and
// checked with Fstat on that same descriptor, then hashed from it, a
// buffer at a time: the files' bytes are not kept (Read them one by one).
func Scan(workFolder, source string, maxBytes int64, published map[string]string) ([]File, []Skip, error) {
	root, err := openRoot(workFolder, source)
	if err != nil {
		return nil, nil, err
	}
	w := &walker{maxBytes: maxBytes, published: published}
	w.dir(root, "", 0) // closes root
	sort.Slice(w.files, func(i, j int) bool { return w.files[i].Path < w.files[j].Path })
	sort.Slice(w.skips, func(i, j int) bool { return w.skips[i].Path < w.skips[j].Path })
	return w.files, w.skips, nil
}

// ErrNotPublishable is returned by Read for a file Scan would skip.
var ErrNotPublishable = errors.New("not publishable")

// Read reads one file of the outbox by its relative path, under the rules
// of Scan: every folder on the way and the file itself are opened without
// following links, and the bytes are hashed as they are read from the same
// descriptor. An upload reads its bytes with it, after Scan hashed them:
// the caller compares the SHA256 with Scan's, since the file may have
// changed in between.
func Read(workFolder, source, rel string, maxBytes int64) (*File, error) {
	if rel == "" || path.Clean(rel) != rel || strings.HasPrefix(rel, "../") || rel == ".." || path.IsAbs(rel) || rel == GitIgnore {
		return nil, fmt.Errorf("%q: %w", rel, ErrNotPublishable)
	}
	fd, err := openRoot(workFolder, source)
	if err != nil {
		return nil, err
	}
	f, skip, err := readAt(fd, rel, rel, maxBytes)
	switch {
	case err != nil:
		return nil, err
	case skip != "":
		return nil, fmt.Errorf("%s (%s): %w", rel, skip, ErrNotPublishable)
	}
	return f, nil
}

// readAt reads the file at the slash-separated path rel below the folder
// open at fd (and closes fd): every folder on the way is opened with
// O_NOFOLLOW, the file by walker.file, so a link anywhere is refused, not
// followed. name is the file's Path in the result.
func readAt(fd int, rel, name string, maxBytes int64) (*File, string, error) {
	parts := strings.Split(rel, "/")
	for _, p := range parts[:len(parts)-1] {
		next, err := unix.Openat(fd, p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			if r := reasonOf(err); r != ReasonUnreadable {
				return nil, r, nil
			}
			return nil, "", fmt.Errorf("%s: %w", name, err)
		}
		fd = next
	}
	defer unix.Close(fd)
	w := &walker{maxBytes: maxBytes, read: true}
	return w.file(fd, parts[len(parts)-1], name)
}

// testHookReadInside, when set by a test, runs between ReadInside's
// resolving of the links and its opens, where a swap would race them.
var testHookReadInside func()

// ReadInside reads the file name of folder (CLAUDE.md, say) for a reader
// who must get nothing from outside folder. A link is followed only while
// it stays inside folder: name's links are resolved, and a target outside
// is refused (ReasonOutside). Then folder and every folder on the way to the
// target are opened from folder's descriptor without following a link, so
// a folder or file swapped for a link after the check is refused, not
// followed; the file must be a regular file with one link of at most
// maxBytes, as Read's. A file it will not read is a Skip error; a missing
// one (a dangling link too) fs.ErrNotExist.
func ReadInside(folder, name string, maxBytes int64) (*File, error) {
	real, err := filepath.EvalSymlinks(folder)
	if err != nil {
		return nil, err
	}
	target, err := filepath.EvalSymlinks(filepath.Join(real, name))
	if err != nil {
		return nil, err
	}
	rel, err := filepath.Rel(real, target)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return nil, Skip{Path: name, Reason: ReasonOutside}
	}
	if testHookReadInside != nil {
		testHookReadInside()
	}
	fd, err := unix.Open(real, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: real, Err: err}
	}
	f, skip, err := readAt(fd, filepath.ToSlash(rel), name, maxBytes)
	switch {
	case err != nil:
		return nil, err
	case skip != "":
		return nil, Skip{Path: name, Reason: skip}
	}
	return f, nil
}

type walker struct {
	maxBytes  int64
	read      bool // keep the bytes (Read), or only hash them (Scan)
	published map[string]string
	files     []File
	skips     []Skip
}

func (w *walker) skip(p, reason string) { w.skips = append(w.skips, Skip{Path: p, Reason: reason}) }

// dir reads the folder open at fd (and closes it); prefix is its relative
// path ("" for the root).
func (w *walker) dir(fd int, prefix string, depth int) {
	d := os.NewFile(uintptr(fd), prefix)
	defer d.Close()
	entries, err := d.ReadDir(-1)
	if err != nil && len(entries) == 0 {
		if prefix != "" {
			w.skip(prefix, ReasonUnreadable)
		}
		return
	}
	for _, e := range entries {
		name := e.Name()
		rel := name
		if prefix != "" {
			rel = prefix + "/" + name
		}
		if prefix == "" && name == GitIgnore {
			continue
		}
		if e.Type()&fs.ModeSymlink != 0 {
			w.skip(rel, ReasonSymlink)
			continue
		}
		if e.IsDir() {
			if depth+1 >= maxDepth {
				w.skip(rel, ReasonTooDeep)
				continue
			}
			sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				// Swapped for a link since ReadDir: ELOOP/ENOTDIR.
				w.skip(rel, reasonOf(err))
				continue
			}
			w.dir(sub, rel, depth+1)
			continue
		}
		f, reason, err := w.file(fd, name, rel)
		switch {
		case err != nil:
			w.skip(rel, ReasonUnreadable)
		case reason != "":
			w.skip(rel, reason)
		case w.published[rel] == f.SHA256:
		default:
			w.files = append(w.files, *f)
		}
	}
}

// file opens name in the folder dirfd without following a link, checks
// it with Fstat on the same descriptor and hashes it from there, keeping
// its bytes when w.read is set.
func (w *walker) file(dirfd int, name, rel string) (*File, string, error) {
	// O_NONBLOCK: opening a FIFO the agent left must not hang the run.
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		if r := reasonOf(err); r != ReasonUnreadable {
			return nil, r, nil
		}
		return nil, "", fmt.Errorf("%s: %w", rel, err)
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, "", fmt.Errorf("%s: %w", rel, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, ReasonNotRegular, nil
	case st.Nlink > 1:
		// Another name for the same bytes may lie outside the outbox.
		return nil, ReasonHardlink, nil
	case st.Size > w.maxBytes:
		return nil, ReasonTooLarge, nil
	}
	h := sha256.New()
	src := io.LimitReader(f, w.maxBytes+1)
	var data []byte
	var n int64
	if w.read {
		data, err = io.ReadAll(io.TeeReader(src, h))
		n = int64(len(data))
	} else {
		n, err = io.Copy(h, src)
	}
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", rel, err)
	}
	if n > w.maxBytes {
		return nil, ReasonTooLarge, nil // it grew while we read
	}
	out := &File{Path: rel, Size: n, SHA256: hex.EncodeToString(h.Sum(nil)), Data: data, MediaType: MediaType(rel)}
	if w.read {
		out.Encoding = "base64"
		if utf8.Valid(data) && !bytes.ContainsRune(data, 0) {
			out.Encoding = "utf-8"
		}
	}
	return out, "", nil
}

func reasonOf(err error) string {
	switch {
	case errors.Is(err, unix.ELOOP):
		return ReasonSymlink
	case errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ENXIO), errors.Is(err, unix.EOPNOTSUPP):
		// ENXIO: a socket on Linux; EOPNOTSUPP: a socket on macOS.
		return ReasonNotRegular
	}
	return ReasonUnreadable
}

// mediaTypes is fixed here, not read from the machine's mime.types, so
// one file gets the same media type on every host.
var mediaTypes = map[string]string{
	".md": "text/markdown", ".markdown": "text/markdown", ".txt": "text/plain", ".log": "text/plain",
	".csv": "text/csv", ".tsv": "text/tab-separated-values", ".html": "text/html", ".htm": "text/html",
	".css": "text/css", ".js": "text/javascript", ".json": "application/json", ".jsonl": "application/jsonl",
	".yaml": "application/yaml", ".yml": "application/yaml", ".xml": "application/xml", ".toml": "application/toml",
	".diff": "text/x-diff", ".patch": "text/x-diff", ".go": "text/x-go", ".py": "text/x-python", ".sh": "text/x-shellscript",
	".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp",
	".svg": "image/svg+xml", ".pdf": "application/pdf", ".zip": "application/zip", ".gz": "application/gzip",
	".tar": "application/x-tar", ".wasm": "application/wasm",
}

// MediaType is a file's media type by its extension; application/octet-stream
// when unknown.
func MediaType(name string) string {
	ext := strings.ToLower(path.Ext(name))
	if t, ok := mediaTypes[ext]; ok {
		return t
	}
	return "application/octet-stream"
}
