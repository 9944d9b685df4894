package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/blobhub/bhtest"
)

// TestLoginPromptsAtATerminal: `bhw-run login` at a terminal with no key
// given asks for the URL (Enter keeps the default shown) and the key
// without echoing it, as blobhub-worker login does, then stores the
// profile.
func TestLoginPromptsAtATerminal(t *testing.T) {
	e := newE2E(t)
	env := []string{"PATH=" + filepath.Dir(bhwBin) + ":/usr/bin:/bin", "HOME=" + e.home, "LANG=C.UTF-8", "BHW_LOG_FORMAT=auto",
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost",
		"HISTFILE=/dev/null"} // the shell writes no history into HOME as tmux ends it
	tm := newTmux(t, env)
	tm.typeLine("bhw-run login --profile tty; echo \"login-exit=$?\"")
	tm.waitFor("the URL prompt", func(s string) bool { return strings.Contains(s, "API URL [https://api.blobhub.io/v1]: ") })
	tm.typeLine(e.srv.URL())
	tm.waitFor("the key prompt", func(s string) bool { return strings.Contains(s, "API key: ") })
	tm.typeLine(bhtest.RunnerKey)
	s := plain(tm.waitFor("login's end", func(s string) bool { return regexp.MustCompile(`login-exit=\d`).MatchString(s) }))
	if !strings.Contains(s, "login-exit=0") || !strings.Contains(s, `Logged in as Runner Test (usr_runner), profile "tty"`) {
		t.Errorf("login at a terminal:\n%s", s)
	}
	if strings.Contains(s, bhtest.RunnerKey) {
		t.Errorf("the key was echoed:\n%s", s)
	}
	b, err := os.ReadFile(filepath.Join(e.home, ".blobhub", "credentials.yaml"))
	if err != nil || !strings.Contains(string(b), bhtest.RunnerKey) || !strings.Contains(string(b), e.srv.URL()) {
		t.Errorf("credentials.yaml: %v\n%s", err, b)
	}
}
