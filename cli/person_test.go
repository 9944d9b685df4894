package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/setup"
)

// lockedBuffer is a writer a test may read while ThreadShow writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestThreadShowFollow: --follow prints an item posted after it started,
// once, and returns nil when its context ends (main cancels it on SIGINT).
func TestThreadShowFollow(t *testing.T) {
	srv := bhtest.New(t)
	const alias = "show/t1"
	srv.Put(alias, string(envelope.NewThread(t.TempDir(), claudeType, "", alias)))
	srv.PersonPost(alias, "before the show")

	out := &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- threadShow(ctx, srv.Client(bhtest.PersonKey), alias, showOptions{Follow: true, Poll: 5 * time.Millisecond}, out)
	}()
	waitOutput := func(what string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for !strings.Contains(out.String(), what) {
			select {
			case err := <-done:
				t.Fatalf("ThreadShow returned %v before printing %q:\n%s", err, what, out)
			case <-deadline:
				t.Fatalf("%q never printed:\n%s", what, out)
			case <-tick.C:
			}
		}
	}
	waitOutput("before the show")
	polls := srv.Count("list_session_thread_items")
	srv.PersonPost(alias, "posted while following")
	waitOutput("posted while following")
	if srv.Count("list_session_thread_items") <= polls {
		t.Fatal("the new item was printed without a new poll")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ThreadShow after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ThreadShow kept following after its context ended")
	}
	s := out.String()
	if !strings.HasPrefix(s, "thread show/t1: pending") || strings.Count(s, "posted while following") != 1 || strings.Count(s, "before the show") != 1 {
		t.Fatalf("output:\n%s", s)
	}
}

// TestThreadShowBounded: `thread show` prints items as it reads them and,
// without --follow, stops a list that never ends with a clear error.
func TestThreadShowBounded(t *testing.T) {
	defer func(l blobhub.Limits) { showLimits = l }(showLimits)
	showLimits = blobhub.Limits{Items: 120}
	srv := bhtest.New(t)
	const alias = "show/endless"
	srv.Put(alias, string(envelope.NewThread("/w", claudeType, "approval", alias)))
	srv.PersonPost(alias, "first")
	srv.EndlessList(alias, 50, 10)
	var out strings.Builder
	err := threadShow(t.Context(), srv.Client(bhtest.PersonKey), alias, showOptions{JSON: true}, &out)
	var ee *exit.Error
	if !errors.As(err, &ee) || ee.Exit != exit.TempFail || !strings.Contains(ee.Message, "--follow") {
		t.Fatalf("show = %v, want exit 75 naming --follow", err)
	}
	if n := strings.Count(out.String(), "\n"); n != 120 {
		t.Fatalf("printed %d lines, want 120", n)
	}
}

// TestPosterIsRunner: the person's side refuses to post with the runner's
// own identity, which the runner would drop as its own item.
func TestPosterIsRunner(t *testing.T) {
	srv := bhtest.New(t)
	state := t.TempDir()
	b, _ := yaml.Marshal(setup.Identity{UserID: bhtest.RunnerUserID, RecordedAt: "2026-01-01T00:00:00Z"})
	if err := os.WriteFile(filepath.Join(state, "identity.yaml"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := setup.Resolve(setup.Options{APIURL: srv.URL(), APIKey: bhtest.RunnerKey, StateDir: state, Home: state,
		RevisionID: bhtest.RevisionID, SessionID: bhtest.SessionID, Adapters: adapters}, "")
	if err != nil {
		t.Fatal(err)
	}
	err = checkPoster(t.Context(), s, srv.Client(bhtest.RunnerKey), func(string) {})
	var ee *exit.Error
	if !errors.As(err, &ee) || ee.Exit != exit.Config || ee.Code != exit.CodePosterIsRunner || !strings.Contains(ee.Message, "--as") {
		t.Fatalf("err = %v", err)
	}
	if err := checkPoster(t.Context(), s, srv.Client(bhtest.PersonKey), func(string) {}); err != nil {
		t.Fatalf("the person's own key was refused: %v", err)
	}
}

// TestThreadShowNotAThread: the person's commands on an object that is not
// a thread — its items answer invalid_thread_envelope — exit 66, not 75
// "try again later".
func TestThreadShowNotAThread(t *testing.T) {
	srv := bhtest.New(t)
	srv.Put("note", `{"type":"note"}`)
	var out strings.Builder
	err := threadShow(t.Context(), srv.Client(bhtest.PersonKey), "note", showOptions{}, &out)
	var ee *exit.Error
	if !errors.As(err, &ee) || ee.Exit != exit.NoThread || ee.Code != exit.CodeNoThread {
		t.Fatalf("thread show: %v, want exit 66 THREAD_NOT_FOUND", err)
	}
	_, err = threadPost(t.Context(), srv.Client(bhtest.PersonKey), "note", "hello")
	if !errors.As(err, &ee) || ee.Exit != exit.NoThread || ee.Code != exit.CodeNoThread {
		t.Fatalf("thread post: %v, want exit 66 THREAD_NOT_FOUND", err)
	}
}
