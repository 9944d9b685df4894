//go:build realcli

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/blobhub/bhtest"
)

// The one credentials file, both ways: a profile the real blobhub-worker
// login writes is one bhw-run's whoami, profile ls and runs use, and one
// bhw-run login writes is one the worker's whoami and profile ls read.
func TestPeerLoginSharesTheCredentialsFile(t *testing.T) {
	worker := peerWorker(t)
	e := newE2E(t)
	env := []string{"HOME=" + e.home, "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8",
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost", "RUNNER_KEY=" + bhtest.RunnerKey, "PERSON_KEY=" + bhtest.PersonKey}
	in := func(bin string) func(args ...string) string {
		return func(args ...string) string {
			t.Helper()
			cmd := exec.Command(bin, args...)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s %v: %v\n%s", filepath.Base(bin), args, err, out)
			}
			return string(out)
		}
	}
	peer, ours := in(worker), in(bhwBin)

	peer("login", "--profile", "theirs", "--api-key-env", "RUNNER_KEY", "--api-url", e.srv.URL(), "--no-input")
	if out := ours("whoami"); !strings.Contains(out, "Profile: theirs") || !strings.Contains(out, "User: Runner Test (usr_runner)") {
		t.Errorf("bhw-run whoami after the worker's login:\n%s", out)
	}
	ours("login", "--profile", "mine", "--api-key-env", "PERSON_KEY", "--api-url", e.srv.URL(), "--no-input")
	if fi, err := os.Stat(filepath.Join(e.home, ".blobhub", "credentials.yaml")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("credentials.yaml after bhw-run login: %v, %v; want mode 0600", fi, err)
	}
	if out := peer("whoami", "--profile", "mine"); !strings.Contains(out, "usr_person") {
		t.Errorf("the worker's whoami --profile mine:\n%s", out)
	}
	theirs, mine := peer("profile", "ls"), ours("profile", "ls")
	for _, want := range []string{"* theirs (" + e.srv.URL() + ") [state]", "  mine (" + e.srv.URL() + ") [state]"} {
		if !strings.Contains(theirs, want) || !strings.Contains(mine, want) {
			t.Errorf("profile ls: want %q in both\nworker:\n%s\nbhw-run:\n%s", want, theirs, mine)
		}
	}
}
