package blobhub_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
)

// TestDownloadBound: a download made under WithMaxValue refuses a value
// larger than the bound with a *TooLargeError, over HTTP after reading at
// most the bound (and never asking again: the same answer would be as
// large), from the local store without reading the file; a value within
// the bound and a download without one are read as before.
func TestDownloadBound(t *testing.T) {
	const limit = 64 << 10
	big := `{"type":"thread","notes":"` + strings.Repeat("n", 4*limit) + `"}`
	small := `{"type":"thread"}`

	var asked atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		body, _ := io.ReadAll(r.Body)
		v := small
		if strings.Contains(string(body), `"big"`) {
			v = big
		}
		_, _ = io.WriteString(w, `{"status":"success","object":{"alias":"x","value":`+v+`}}`)
	}))
	defer hs.Close()
	c := newClient(t, blobhub.Config{APIURL: hs.URL + "/v1", APIKey: "bhk_x", RevisionID: "rev_1", SessionID: "ses_1"})
	ctx := blobhub.WithMaxValue(t.Context(), limit)
	_, err := c.Download(ctx, "big")
	var tl *blobhub.TooLargeError
	if !errors.Is(err, blobhub.ErrTooLarge) || !errors.As(err, &tl) || tl.Max != limit {
		t.Fatalf("err %v, want a TooLargeError of max %d", err, limit)
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("asked %d times, want once", n)
	}
	if o, err := c.Download(ctx, "small"); err != nil || string(o.Value) != small {
		t.Fatalf("a value within the bound: %s %v", o.Value, err)
	}
	if o, err := c.Download(t.Context(), "big"); err != nil || len(o.Value) != len(big) {
		t.Fatalf("without a bound: %d bytes %v", len(o.Value), err)
	}

	srv := bhtest.New(t)
	srv.Put("big", big)
	srv.Put("small", small)
	lc := newClient(t, blobhub.Config{APIURL: "file://" + srv.Dir(), RevisionID: bhtest.RevisionID, SessionID: bhtest.SessionID})
	if _, err := lc.Download(ctx, "big"); !errors.Is(err, blobhub.ErrTooLarge) {
		t.Fatalf("local store: err %v, want ErrTooLarge", err)
	}
	if o, err := lc.Download(ctx, "small"); err != nil || string(o.Value) != small {
		t.Fatalf("local store, within the bound: %s %v", o.Value, err)
	}
}

// TestLocalStoreRecordsTheType: the local store writes an object's type
// ahead of its value, so the thread check of every item list reads a few
// bytes, not the value (a 50 MB envelope made each idle run read it whole,
// BenchmarkIdleTick in run/); a file of an earlier version, which has no
// type of its own, is checked by reading the value as before.
func TestLocalStoreRecordsTheType(t *testing.T) {
	srv := bhtest.New(t)
	srv.Thread("th")
	srv.Put("nt", `{"type":"note"}`)
	files, err := filepath.Glob(filepath.Join(srv.Dir(), "sessions", "*", "objects", "*.json"))
	if err != nil || len(files) != 2 {
		t.Fatalf("object files %v, %v", files, err)
	}
	c := srv.Client(bhtest.RunnerKey)
	check := func(when string) {
		t.Helper()
		if _, err := c.ListItems(t.Context(), "th", blobhub.ItemQuery{}); err != nil {
			t.Errorf("%s: list of a thread: %v", when, err)
		}
		if _, err := c.ListItems(t.Context(), "nt", blobhub.ItemQuery{}); !errors.Is(err, blobhub.ErrNoThread) {
			t.Errorf("%s: list of a note: %v, want ErrNoThread", when, err)
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ty, val := bytes.Index(b, []byte(`"type": "`)), bytes.Index(b, []byte(`"value"`))
		if ty < 0 || val < 0 || ty > val {
			t.Errorf("%s does not record the type ahead of the value:\n%s", f, b)
		}
	}
	check("with the type recorded")
	for _, f := range files { // as an earlier version wrote them
		b, _ := os.ReadFile(f)
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "type")
		b, _ = json.Marshal(m)
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	check("without it")
}
