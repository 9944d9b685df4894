package blobhub_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/blobhub"
)

// A host that does not resolve is a wrong URL: the first answer of the
// resolver ends the call, with the URL named, and no retry is made or
// announced. The dialer answers as the resolver does for a name that does
// not exist, so the test needs no DNS.
func TestNoSuchHostFailsFast(t *testing.T) {
	var dials, retries atomic.Int32
	hc := &http.Client{Transport: &http.Transport{DialContext: func(_ context.Context, _, addr string) (net.Conn, error) {
		dials.Add(1)
		host, _, _ := net.SplitHostPort(addr)
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}}
	}}}
	c, err := blobhub.New(blobhub.Config{APIURL: "https://blobhub.invalid/v1", APIKey: "k", RevisionID: "rev_1", SessionID: "ses_1",
		HTTPClient: hc, RetryBudget: time.Minute, RetryWaitMin: time.Microsecond, RetryWaitMax: time.Microsecond,
		OnRetry: func(blobhub.Retry) { retries.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"download": func() error { _, err := c.Download(context.Background(), "a/b"); return err },
		"post":     func() error { _, err := c.Post(context.Background(), "a/b", blobhub.NewItem{}); return err },
	} {
		dials.Store(0)
		err := call()
		if !errors.Is(err, blobhub.ErrNoSuchHost) || errors.Is(err, blobhub.ErrUnavailable) {
			t.Errorf("%s: %v, want ErrNoSuchHost and not ErrUnavailable", name, err)
		}
		if err != nil && !strings.Contains(err.Error(), "https://blobhub.invalid/v1") {
			t.Errorf("%s: %q does not name the API URL", name, err)
		}
		if n := dials.Load(); n != 1 {
			t.Errorf("%s: %d dials, want 1", name, n)
		}
	}
	if n := retries.Load(); n != 0 {
		t.Errorf("%d retries announced, want none", n)
	}
}

// A BlobHub that refuses connections is retried within the budget, and
// each retry is announced with why, its number and the time left.
func TestRetryIsAnnounced(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now: connections are refused
	var (
		mu   sync.Mutex
		seen []blobhub.Retry
	)
	c, err := blobhub.New(blobhub.Config{APIURL: "http://" + addr + "/v1", APIKey: "k", RevisionID: "rev_1", SessionID: "ses_1",
		RetryBudget: 50 * time.Millisecond, RetryWaitMin: 5 * time.Millisecond, RetryWaitMax: 5 * time.Millisecond,
		OnRetry: func(r blobhub.Retry) { mu.Lock(); seen = append(seen, r); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Download(context.Background(), "a/b"); !errors.Is(err, blobhub.ErrUnavailable) {
		t.Fatalf("download from a refusing port: %v, want ErrUnavailable", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) < 2 {
		t.Fatalf("%d retries announced, want several: %+v", len(seen), seen)
	}
	for i, r := range seen {
		if r.Attempt != i+1 || r.Reason != "connection refused" || r.Command != blobhub.CmdDownload || r.Wait != 5*time.Millisecond {
			t.Errorf("retry %d: %+v, want attempt %d, connection refused, download, a 5ms wait", i, r, i+1)
		}
		if i > 0 && r.Left >= seen[i-1].Left {
			t.Errorf("retry %d leaves %v of the budget, not less than the %v before", i, r.Left, seen[i-1].Left)
		}
	}
}
