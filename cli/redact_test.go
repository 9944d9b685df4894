package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// TestServerErrorEchoingTheKeyIsRedacted: a BlobHub (or a proxy) whose
// error echoes the request's key puts it in the error message; the
// --json summary, the human line and every stderr line (the error line and
// the log records) print it redacted, for a run and for ls.
func TestServerErrorEchoingTheKeyIsRedacted(t *testing.T) {
	const key = "bhk_echoed_key_9931"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": "BAD_KEY",
			"message": "no session for the key in " + r.Header.Get("X-API-Key")}})
		_, _ = w.Write(b)
	}))
	defer srv.Close()
	root := t.TempDir()
	t.Setenv("HOME", filepath.Join(root, "home"))
	t.Setenv("BLOBHUB_API_KEY", key)
	global := []string{"bhw-run", "--api-url", srv.URL + "/v1", "--state-dir", filepath.Join(root, "state"),
		"--revision", "rev_x", "--session", "ses_x", "--log-format", "json"}
	for _, args := range [][]string{{"--json", "projects/p1/t"}, {"projects/p1/t"}, {"ls"}, {"thread", "show", "projects/p1/t"}} {
		var out, errOut bytes.Buffer
		code := Main(append(global, args...), &out, &errOut, "", adapters)
		t.Logf("%v → exit %d\nstdout: %s\nstderr: %s", args, code, out.String(), errOut.String())
		if code != 75 {
			t.Errorf("%v: exit %d, want 75 (BlobHub answered an error)", args, code)
		}
		all := out.String() + errOut.String()
		if strings.Contains(all, key) {
			t.Errorf("%v printed the key", args)
		}
		if !strings.Contains(errOut.String(), "[REDACTED]") {
			t.Errorf("%v: stderr does not carry the server's message, redacted", args)
		}
		if args[0] == "--json" && !strings.Contains(out.String(), `"message":"BlobHub answered an error`) {
			t.Errorf("the --json summary lacks the error message: %s", out.String())
		}
	}
}
