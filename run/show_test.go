package run

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/envelope"
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
	srv.Put(alias, string(envelope.NewThread(t.TempDir(), testAgent, "", alias)))
	srv.PersonPost(alias, "before the show")

	out := &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- ThreadShow(ctx, srv.Client(bhtest.PersonKey), alias, false, true, 5*time.Millisecond, out)
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
