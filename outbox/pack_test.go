package outbox

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// unpack reads a Pack archive back: path → bytes, in order.
func unpack(t *testing.T, data []byte) ([]string, map[string]string) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var order []string
	got := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return order, got
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if h.Mode != 0o644 || h.Uid != 0 || h.ModTime.Unix() != 0 {
			t.Fatalf("%s: mode %o uid %d time %v, want 0644, 0, the epoch", h.Name, h.Mode, h.Uid, h.ModTime)
		}
		order = append(order, h.Name)
		got[h.Name] = string(b)
	}
}

// TestPack: the files are packed in order, a link and a missing file left
// out; packing again gives the same bytes; maxFiles and maxBytes bound it.
func TestPack(t *testing.T) {
	work := t.TempDir()
	out := filepath.Join(work, "out")
	var paths []string
	for i := range 8 {
		p := fmt.Sprintf("d/f%d.txt", i)
		if err := os.MkdirAll(filepath.Join(out, "d"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, p), []byte(fmt.Sprintf("file %d\n", i)), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(out, "link")); err != nil {
		t.Fatal(err)
	}
	p, err := Pack(work, "out", append([]string{"link", "gone"}, paths...), 1<<20, 100)
	if err != nil {
		t.Fatal(err)
	}
	order, got := unpack(t, p.Data)
	if !slices.Equal(order, paths) || got["d/f3.txt"] != "file 3\n" || len(p.Files) != len(paths) {
		t.Fatalf("packed %v (%d files)", order, len(p.Files))
	}
	again, err := Pack(work, "out", paths, 1<<20, 100)
	if err != nil || !bytes.Equal(again.Data, p.Data) || again.SHA256 != p.SHA256 {
		t.Fatalf("packed again: %v, same bytes %v", err, bytes.Equal(again.Data, p.Data))
	}
	if few, _ := Pack(work, "out", paths, 1<<20, 3); len(few.Files) != 3 {
		t.Fatalf("maxFiles 3 packed %d", len(few.Files))
	}
	if none, _ := Pack(work, "out", []string{"link", "gone"}, 1<<20, 3); none.Data != nil || len(none.Files) != 0 {
		t.Fatalf("nothing packable packed %d files", len(none.Files))
	}
	if _, err := Pack(work, "missing", paths, 1<<20, 3); err == nil {
		t.Fatal("a missing outbox packed")
	}
}

// TestPackBound: incompressible files stop the archive before it passes
// maxBytes, whatever maxBytes is.
func TestPackBound(t *testing.T) {
	work := t.TempDir()
	out := filepath.Join(work, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for i := range 40 {
		b := make([]byte, 700+37*i)
		_, _ = rand.Read(b)
		p := fmt.Sprintf("r%02d.bin", i)
		if err := os.WriteFile(filepath.Join(out, p), b, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	for _, max := range []int64{4096, 5000, 10000, 33333} {
		p, err := Pack(work, "out", paths, max, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(p.Data)) > max || len(p.Files) == 0 || len(p.Files) == len(paths) {
			t.Fatalf("maxBytes %d: %d bytes, %d files", max, len(p.Data), len(p.Files))
		}
		order, _ := unpack(t, p.Data)
		if !slices.Equal(order, paths[:len(p.Files)]) {
			t.Fatalf("maxBytes %d: packed %v", max, order)
		}
	}
}
