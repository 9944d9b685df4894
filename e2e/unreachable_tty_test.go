package e2e

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestUnreachableBlobHubAtATerminalE2E: a run whose BlobHub refuses
// connections does not look like a hang. At a terminal its status line says
// what it waits for and counts the retries, -v logs each one, and Ctrl-C
// during the wait ends the run as an interrupt: 130, code INTERRUPTED,
// never INTERNAL.
func TestUnreachableBlobHubAtATerminalE2E(t *testing.T) {
	e := newE2E(t)
	e.writeConfig()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String() + "/v1"
	l.Close() // nothing listens there now: every connection is refused
	env := append(e.environ(""), "PATH="+filepath.Dir(bhwBin)+":"+os.Getenv("PATH"), "BHW_LOG_FORMAT=auto", "BLOBHUB_API_URL="+url, "BLOBHUB_API_KEY=bhk_test")
	tm := newTmux(t, env)
	tm.typeLine("bhw-run -v down/t1; echo \"run-exit=$?\"")
	want := regexp.MustCompile(`⋯ down/t1 \d+:\d\d · BlobHub unreachable: connection refused; retry [2-9], gives up in \d+:\d\d`)
	s := tm.waitFor("the status line saying BlobHub is unreachable, at its second retry", func(s string) bool { return want.MatchString(plain(s)) })
	if n := strings.Count(plain(s), "blobhub retry"); n < 2 {
		t.Errorf("-v logged %d retries, want one line each:\n%s", n, plain(s))
	}
	tm.cmd("send-keys", "-t", "bhw", "C-c")
	s = tm.waitFor("the end of the run", func(s string) bool { return exited("run", s) })
	text := plain(s)
	if !strings.Contains(text, "run-exit=130") || !strings.Contains(text, "INTERRUPTED") || strings.Contains(text, "INTERNAL") {
		t.Errorf("Ctrl-C during the wait: want exit 130 with code INTERRUPTED, never INTERNAL:\n%s", text)
	}
	if strings.Contains(lineWith(text, "run-exit="), "⋯") || strings.Count(text, "⋯ down/t1") > 1 {
		t.Errorf("the status line was not erased or redrawn in place:\n%s", text)
	}
}

// TestUnresolvableBlobHubFailsFastE2E: an API URL whose host does not
// resolve (.invalid, which RFC 6761 keeps from ever resolving) is a
// configuration error: exit 78 at once, the URL named, no retry.
func TestUnresolvableBlobHubFailsFastE2E(t *testing.T) {
	const host = "bhw-run-test.invalid"
	if _, err := net.LookupHost(host); err == nil {
		t.Fatalf("%s resolves on this machine; the test needs a resolver that says it does not", host)
	} else if dns, ok := err.(*net.DNSError); !ok || !dns.IsNotFound {
		t.Fatalf("the resolver does not answer for %s (%v); the test needs one that says there is no such host", host, err)
	}
	e := newE2E(t)
	e.writeConfig()
	url := "https://" + host + "/v1"
	cmd := exec.Command(bhwBin, "-v", "down/t1")
	cmd.Env = append(e.environ(""), "BLOBHUB_API_URL="+url, "BLOBHUB_API_KEY=bhk_test")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	code := -1
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	text := string(out)
	if code != 78 || !strings.Contains(text, "INVALID_CONFIG") || !strings.Contains(text, url) {
		t.Errorf("exit %d, want 78 INVALID_CONFIG naming %s:\n%s", code, url, text)
	}
	if strings.Contains(text, "blobhub retry") {
		t.Errorf("a host that does not resolve was retried:\n%s", text)
	}
	// Generous for a busy machine; the retry budget it used to spend is
	// two minutes.
	if took > 30*time.Second {
		t.Errorf("took %v to give up", took)
	}
}
