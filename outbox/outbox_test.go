package outbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

const src = ".bhw/outbox"

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func sum(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

func paths(fs []File) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Path)
	}
	return out
}

func TestCreate(t *testing.T) {
	work := t.TempDir()
	created, err := Create(work, src)
	if err != nil || !created {
		t.Fatalf("Create = %v, %v; want true, nil", created, err)
	}
	gi, err := os.ReadFile(filepath.Join(work, src, GitIgnore))
	if err != nil || string(gi) != "*\n" {
		t.Fatalf(".gitignore = %q, %v", gi, err)
	}
	// Idempotent, and a file already there is left alone.
	write(t, filepath.Join(work, src, GitIgnore), "mine\n")
	created, err = Create(work, src)
	if err != nil || created {
		t.Fatalf("second Create = %v, %v; want false, nil", created, err)
	}
	if gi, _ := os.ReadFile(filepath.Join(work, src, GitIgnore)); string(gi) != "mine\n" {
		t.Fatalf(".gitignore rewritten: %q", gi)
	}
	// No temporary folder is left next to it.
	entries, _ := os.ReadDir(filepath.Join(work, ".bhw"))
	if len(entries) != 1 {
		t.Fatalf("entries next to the outbox: %v", entries)
	}
}

func TestCreateExistingFolderGetsNoGitignore(t *testing.T) {
	work := t.TempDir()
	write(t, filepath.Join(work, "out", "keep.txt"), "x")
	created, err := Create(work, "out")
	if err != nil || created {
		t.Fatalf("Create = %v, %v; want false, nil", created, err)
	}
	if _, err := os.Stat(filepath.Join(work, "out", GitIgnore)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a .gitignore was written into a folder bhw-run did not create: %v", err)
	}
}

func TestCreateRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, source string
		prepare      func(t *testing.T, work string)
	}{
		{name: "dot", source: "."},
		{name: "dotdot", source: "../x"},
		{name: "absolute", source: "/tmp/x"},
		{name: "git", source: ".git/x"},
		{name: "unclean", source: "a//b"},
		{name: "symlink parent out", source: "link/out", prepare: func(t *testing.T, work string) {
			if err := os.Symlink(t.TempDir(), filepath.Join(work, "link")); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "symlink out", source: "out", prepare: func(t *testing.T, work string) {
			if err := os.Symlink("/etc", filepath.Join(work, "out")); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "symlink into git", source: "g/out", prepare: func(t *testing.T, work string) {
			os.MkdirAll(filepath.Join(work, ".git"), 0o755)
			if err := os.Symlink(".git", filepath.Join(work, "g")); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "a file", source: "out", prepare: func(t *testing.T, work string) {
			write(t, filepath.Join(work, "out"), "x")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			work := t.TempDir()
			if tc.prepare != nil {
				tc.prepare(t, work)
			}
			created, err := Create(work, tc.source)
			var se *SourceError
			if !errors.As(err, &se) || created {
				t.Fatalf("Create(%q) = %v, %v; want a SourceError", tc.source, created, err)
			}
			if _, _, err := Scan(work, tc.source, 1<<20, nil); err == nil {
				t.Fatalf("Scan(%q) accepted it", tc.source)
			}
		})
	}
}

func TestScan(t *testing.T) {
	for _, tc := range []struct {
		name      string
		prepare   func(t *testing.T, out string)
		published map[string]string
		files     []string
		skips     []Skip
	}{
		{name: "plain files", prepare: func(t *testing.T, out string) {
			write(t, filepath.Join(out, "report.md"), "# hi\n")
			write(t, filepath.Join(out, "sub", "data.bin"), "\x00\xff")
		}, files: []string{"report.md", "sub/data.bin"}},
		{name: "gitignore of the root is never published", prepare: func(t *testing.T, out string) {
			write(t, filepath.Join(out, GitIgnore), "*\n")
			write(t, filepath.Join(out, "sub", GitIgnore), "x\n")
		}, files: []string{"sub/.gitignore"}},
		{name: "symlink to /etc/passwd", prepare: func(t *testing.T, out string) {
			if err := os.Symlink("/etc/passwd", filepath.Join(out, "passwd")); err != nil {
				t.Fatal(err)
			}
		}, skips: []Skip{{"passwd", ReasonSymlink}}},
		{name: "symlinked folder", prepare: func(t *testing.T, out string) {
			if err := os.Symlink("/etc", filepath.Join(out, "etc")); err != nil {
				t.Fatal(err)
			}
		}, skips: []Skip{{"etc", ReasonSymlink}}},
		{name: "hardlink", prepare: func(t *testing.T, out string) {
			secret := filepath.Join(t.TempDir(), "secret")
			write(t, secret, "s3cret")
			if err := os.Link(secret, filepath.Join(out, "copy")); err != nil {
				t.Fatal(err)
			}
		}, skips: []Skip{{"copy", ReasonHardlink}}},
		{name: "big file", prepare: func(t *testing.T, out string) {
			write(t, filepath.Join(out, "big"), string(make([]byte, 101)))
			write(t, filepath.Join(out, "edge"), string(make([]byte, 100)))
		}, files: []string{"edge"}, skips: []Skip{{"big", ReasonTooLarge}}},
		{name: "fifo", prepare: func(t *testing.T, out string) {
			if err := mkfifo(filepath.Join(out, "pipe")); err != nil {
				t.Fatal(err)
			}
		}, skips: []Skip{{"pipe", ReasonNotRegular}}},
		{name: "named like another thread's alias", prepare: func(t *testing.T, out string) {
			write(t, filepath.Join(out, "projects", "p1", "t2", "thread.yaml"), "alias: x\n")
		}, files: []string{"projects/p1/t2/thread.yaml"}},
		{name: "unchanged file is not returned", prepare: func(t *testing.T, out string) {
			write(t, filepath.Join(out, "a.txt"), "same")
			write(t, filepath.Join(out, "b.txt"), "new")
		}, published: map[string]string{"a.txt": sum("same"), "b.txt": sum("old")}, files: []string{"b.txt"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			work := t.TempDir()
			if _, err := Create(work, src); err != nil {
				t.Fatal(err)
			}
			tc.prepare(t, filepath.Join(work, src))
			files, skips, err := Scan(work, src, 100, tc.published)
			if err != nil {
				t.Fatal(err)
			}
			if got := paths(files); !slices.Equal(got, tc.files) {
				t.Fatalf("files %v, want %v", got, tc.files)
			}
			if !slices.Equal(skips, tc.skips) {
				t.Fatalf("skips %v, want %v", skips, tc.skips)
			}
		})
	}
}

// TestScanFileFields: Scan hashes every file and keeps none of its bytes;
// Read reads one, hashed from the same descriptor, with its encoding.
func TestScanFileFields(t *testing.T) {
	work := t.TempDir()
	out := filepath.Join(work, src)
	write(t, filepath.Join(out, "report.md"), "héllo\n")
	write(t, filepath.Join(out, "img.png"), "\x89PNG\x00")
	write(t, filepath.Join(out, "noext"), "\xff\xfe")
	files, _, err := Scan(work, src, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		File
		data string // EncodedData after Read
	}{
		"report.md": {File{Size: 7, SHA256: sum("héllo\n"), MediaType: "text/markdown", Encoding: "utf-8"}, "héllo\n"},
		"img.png":   {File{Size: 5, SHA256: sum("\x89PNG\x00"), MediaType: "image/png", Encoding: "base64"}, "iVBORwA="},
		"noext":     {File{Size: 2, SHA256: sum("\xff\xfe"), MediaType: "application/octet-stream", Encoding: "base64"}, "//4="},
	}
	if len(files) != len(want) {
		t.Fatalf("files %v", paths(files))
	}
	for _, f := range files {
		w := want[f.Path]
		if f.Size != w.Size || f.SHA256 != w.SHA256 || f.MediaType != w.MediaType || f.Data != nil || f.Encoding != "" {
			t.Errorf("scanned %s: got %+v, want %+v without data", f.Path, f, w.File)
		}
		r, err := Read(work, src, f.Path, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if r.Path != f.Path || r.Size != w.Size || r.SHA256 != w.SHA256 || r.MediaType != w.MediaType || r.Encoding != w.Encoding || r.EncodedData() != w.data {
			t.Errorf("read %s: got %+v (data %q), want %+v (data %q)", f.Path, r, r.EncodedData(), w.File, w.data)
		}
	}
}

func TestScanChangedFileReturnedOnce(t *testing.T) {
	work := t.TempDir()
	out := filepath.Join(work, src)
	write(t, filepath.Join(out, "r.txt"), "v1")
	published := map[string]string{}
	scan := func() []string {
		files, _, err := Scan(work, src, 1<<20, published)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			published[f.Path] = f.SHA256
		}
		return paths(files)
	}
	if got := scan(); !slices.Equal(got, []string{"r.txt"}) {
		t.Fatalf("first scan %v", got)
	}
	if got := scan(); len(got) != 0 {
		t.Fatalf("unchanged file returned again: %v", got)
	}
	write(t, filepath.Join(out, "r.txt"), "v2")
	if got := scan(); !slices.Equal(got, []string{"r.txt"}) {
		t.Fatalf("changed file: %v", got)
	}
	if got := scan(); len(got) != 0 {
		t.Fatalf("changed file returned twice: %v", got)
	}
}

func TestScanRootSwappedForSymlink(t *testing.T) {
	work := t.TempDir()
	if _, err := Create(work, src); err != nil {
		t.Fatal(err)
	}
	// The agent replaces the outbox with a link to a folder inside the work
	// folder: still refused, the root is opened with O_NOFOLLOW.
	inside := filepath.Join(work, "elsewhere")
	write(t, filepath.Join(inside, "x.txt"), "x")
	if err := os.RemoveAll(filepath.Join(work, src)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(inside, filepath.Join(work, src)); err != nil {
		t.Fatal(err)
	}
	files, _, err := Scan(work, src, 1<<20, nil)
	var se *SourceError
	if !errors.As(err, &se) || len(files) != 0 {
		t.Fatalf("Scan = %v, %v; want a SourceError", paths(files), err)
	}
	if _, err := Read(work, src, "x.txt", 1<<20); !errors.As(err, &se) {
		t.Fatalf("Read through a swapped root: %v", err)
	}
	// And a link out is refused as well.
	os.Remove(filepath.Join(work, src))
	if err := os.Symlink("/etc", filepath.Join(work, src)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Scan(work, src, 1<<20, nil); !errors.As(err, &se) {
		t.Fatalf("Scan of a root linked out: %v", err)
	}
}

func TestRead(t *testing.T) {
	work := t.TempDir()
	out := filepath.Join(work, src)
	write(t, filepath.Join(out, "sub", "r.txt"), "hello")
	write(t, filepath.Join(out, "big"), string(make([]byte, 11)))
	if err := os.Symlink("/etc/passwd", filepath.Join(out, "passwd")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(out, "etc")); err != nil {
		t.Fatal(err)
	}
	f, err := Read(work, src, "sub/r.txt", 10)
	if err != nil || string(f.Data) != "hello" || f.SHA256 != sum("hello") {
		t.Fatalf("Read = %+v, %v", f, err)
	}
	for _, rel := range []string{"passwd", "big", "etc/passwd", "../x", ".gitignore", "sub/../sub/r.txt"} {
		if _, err := Read(work, src, rel, 10); err == nil {
			t.Errorf("Read(%q) succeeded", rel)
		}
	}
	if _, err := Read(work, src, "gone", 10); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Read of a missing file: %v", err)
	}
}

func mkfifo(p string) error { return unix.Mkfifo(p, 0o644) }

// The outbox's parent swapped for a link out between the check and the open:
// the open must not follow it (only the last component used O_NOFOLLOW).
func TestScanParentSwappedAfterCheck(t *testing.T) {
	work := t.TempDir()
	if _, err := Create(work, src); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	write(t, filepath.Join(outside, "outbox", "secret.txt"), "secret")
	parent := filepath.Join(work, filepath.Dir(src))
	swapped := false
	testHookOpenRoot = func() {
		if swapped {
			return
		}
		swapped = true
		if err := os.Rename(parent, parent+".old"); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, parent); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { testHookOpenRoot = nil })
	files, _, err := Scan(work, src, 1<<20, nil)
	if err == nil || len(files) != 0 {
		t.Fatalf("Scan through a swapped parent = %v, %v; want an error and no files", paths(files), err)
	}
	// Put the folder back and race Read the same way.
	if err := os.Remove(parent); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(parent+".old", parent); err != nil {
		t.Fatal(err)
	}
	swapped = false
	if f, err := Read(work, src, "secret.txt", 1<<20); err == nil || !swapped {
		t.Fatalf("Read through a swapped parent = %v, %v (swapped %v)", f, err, swapped)
	}
}

// A parent that is a link staying inside the work folder is still walked.
func TestScanParentLinkInside(t *testing.T) {
	work := t.TempDir()
	write(t, filepath.Join(work, "real", "outbox", "a.txt"), "a")
	if err := os.Symlink("real", filepath.Join(work, "via")); err != nil {
		t.Fatal(err)
	}
	files, _, err := Scan(work, "via/outbox", 1<<20, nil)
	if err != nil || !slices.Equal(paths(files), []string{"a.txt"}) {
		t.Fatalf("Scan = %v, %v", paths(files), err)
	}
}

// TestReadInside: a file of the folder is read, through links that stay
// inside; a link out, a hard link, a FIFO, a folder and a file too large are
// refused with their reason; a missing file and a dangling link are
// fs.ErrNotExist.
func TestReadInside(t *testing.T) {
	work, outside := t.TempDir(), t.TempDir()
	write(t, filepath.Join(outside, "secret"), "outside text")
	write(t, filepath.Join(work, "docs", "RULES.md"), "rules")
	write(t, filepath.Join(work, "big.md"), "0123456789ab")
	link := func(target, name string) {
		t.Helper()
		if err := os.Symlink(target, filepath.Join(work, name)); err != nil {
			t.Fatal(err)
		}
	}
	link("docs/RULES.md", "inside.md")
	link(filepath.Join(outside, "secret"), "out.md")
	link("../"+filepath.Base(outside)+"/secret", "relout.md")
	link("docs", "viadir")
	link(outside, "outdir")
	link(filepath.Join(outside, "missing"), "dangling.md")
	if err := os.Link(filepath.Join(outside, "secret"), filepath.Join(work, "hard.md")); err != nil {
		t.Fatal(err)
	}
	if err := mkfifo(filepath.Join(work, "fifo.md")); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"docs/RULES.md": "rules", "inside.md": "rules", "viadir/RULES.md": "rules"} {
		f, err := ReadInside(work, name, 10)
		if err != nil || string(f.Data) != want || f.Path != name {
			t.Errorf("ReadInside(%s) = %+v, %v; want %q", name, f, err, want)
		}
	}
	for name, reason := range map[string]string{"out.md": ReasonOutside, "relout.md": ReasonOutside, "outdir/secret": ReasonOutside,
		"hard.md": ReasonHardlink, "fifo.md": ReasonNotRegular, "docs": ReasonNotRegular, "big.md": ReasonTooLarge} {
		f, err := ReadInside(work, name, 10)
		var skip Skip
		if !errors.As(err, &skip) || skip.Reason != reason || f != nil {
			t.Errorf("ReadInside(%s) = %+v, %v; want the reason %q", name, f, err, reason)
		}
	}
	for _, name := range []string{"gone.md", "dangling.md"} {
		if _, err := ReadInside(work, name, 10); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("ReadInside(%s): %v, want fs.ErrNotExist", name, err)
		}
	}
}

// A file swapped for a link out after ReadInside resolved it, or a folder
// on the way swapped so: the open refuses the link instead of following it.
func TestReadInsideSwappedAfterCheck(t *testing.T) {
	for _, swap := range []string{"CLAUDE.md", "docs"} {
		work, outside := t.TempDir(), t.TempDir()
		write(t, filepath.Join(outside, "RULES.md"), "outside text")
		write(t, filepath.Join(work, "docs", "RULES.md"), "rules")
		if err := os.Symlink("docs/RULES.md", filepath.Join(work, "CLAUDE.md")); err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(work, "docs", "RULES.md")
		if swap == "docs" {
			target = filepath.Join(work, "docs")
		}
		testHookReadInside = func() {
			if err := os.RemoveAll(target); err != nil {
				t.Fatal(err)
			}
			to := filepath.Join(outside, "RULES.md")
			if swap == "docs" {
				to = outside
			}
			if err := os.Symlink(to, target); err != nil {
				t.Fatal(err)
			}
		}
		f, err := ReadInside(work, "CLAUDE.md", 1<<20)
		testHookReadInside = nil
		// O_NOFOLLOW|O_DIRECTORY on a link is ENOTDIR: "not a regular file".
		var skip Skip
		if !errors.As(err, &skip) || (skip.Reason != ReasonSymlink && skip.Reason != ReasonNotRegular) || f != nil {
			t.Errorf("%s swapped: ReadInside = %+v, %v; want the link refused", swap, f, err)
		}
	}
}
