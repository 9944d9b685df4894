package blobhub_test

import (
	"bytes"
	"errors"
	"net/http"
	"testing"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
)

// TestSessionFiles: a session file uploaded over HTTP reads back
// byte-identical over HTTP and from the file:// store, its object a file's
// (listed with the session's objects); up to 4 MiB is taken, a byte more
// is refused as file_too_large, and an alias holding no file is not found.
func TestSessionFiles(t *testing.T) {
	srv := bhtest.New(t)
	c := srv.Client(bhtest.RunnerKey)
	local, err := blobhub.New(blobhub.Config{APIURL: "file://" + srv.Dir(), RevisionID: bhtest.RevisionID, SessionID: bhtest.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	full := bytes.Repeat([]byte{0, 1, 2, 255}, blobhub.MaxFileBytes/4)
	for _, cl := range []blobhub.Client{c, local} {
		f, err := cl.UploadFile(t.Context(), "p/out/x.bin", full, "x.bin", "application/octet-stream")
		if err != nil || f.Size != int64(len(full)) {
			t.Fatalf("upload of 4 MiB: %+v %v", f, err)
		}
		for _, rd := range []blobhub.Client{c, local} {
			f, b, err := rd.DownloadFile(t.Context(), "p/out/x.bin")
			if err != nil || !bytes.Equal(b, full) || f.Name != "x.bin" {
				t.Fatalf("download: %+v, %d bytes, %v", f, len(b), err)
			}
		}
		_, err = cl.UploadFile(t.Context(), "p/out/y.bin", append(full, 'x'), "y.bin", "application/octet-stream")
		var ae *blobhub.APIError
		if !errors.As(err, &ae) || ae.Code != blobhub.CodeFileTooLarge || ae.Status != http.StatusRequestEntityTooLarge {
			t.Fatalf("a byte over 4 MiB: %v", err)
		}
		if _, _, err := cl.DownloadFile(t.Context(), "p/out/none"); !errors.Is(err, blobhub.ErrNotFound) {
			t.Fatalf("a missing file: %v", err)
		}
	}
	names, err := c.List(t.Context())
	if err != nil || len(names) != 1 || names[0] != "p/out/x.bin" {
		t.Fatalf("objects %v %v", names, err)
	}
}
