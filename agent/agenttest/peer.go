package agenttest

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"testing"
)

// RunPeer runs the pinned Python peer's interpreter (the virtual
// environment blobhub-worker is installed in) with args and stdin, in a
// home of its own, and returns what it printed on stdout and on stderr. A
// run that fails fails the test, what naming the part of the peer that ran.
func RunPeer(t testing.TB, what string, stdin io.Reader, args ...string) (stdout []byte, stderr string) {
	t.Helper()
	python := PinnedCLI(t, "Python peer", "BHW_PEER_PYTHON", ".tools/peer/bin/python")
	cmd := exec.CommandContext(t.Context(), python, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LANG=C.UTF-8"}
	cmd.Stdin = stdin
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", what, err, errOut.Bytes())
	}
	return out, errOut.String()
}
