package claude

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent"
)

// TestLoginCheckOnMacOS: on macOS Claude Code's /login lives in the
// Keychain, which bhw-run cannot see, so no .credentials.json is "not
// checked" there, never "not logged in"; on Linux it is a missing login.
// A key in the environment or the file is found on both.
func TestLoginCheckOnMacOS(t *testing.T) {
	home := t.TempDir()
	l := agent.Launch{Home: home, Env: []string{"HOME=" + t.TempDir()}}
	if ok, detail := loginCheckOn("linux", l); ok || !strings.HasPrefix(detail, "not logged in: ") {
		t.Errorf("linux, nothing: %v %q", ok, detail)
	}
	ok, detail := loginCheckOn("darwin", l)
	if !ok || !strings.HasPrefix(detail, "not checked: ") || !strings.Contains(detail, "Keychain") {
		t.Errorf("darwin, nothing: %v %q", ok, detail)
	}
	keyed := l
	keyed.Env = append(keyed.Env, "ANTHROPIC_API_KEY=sk-test")
	if ok, detail := loginCheckOn("darwin", keyed); !ok || detail != "ANTHROPIC_API_KEY is set in its environment" {
		t.Errorf("darwin, a key: %v %q", ok, detail)
	}
	if err := os.WriteFile(filepath.Join(home, ".credentials.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, goos := range []string{"linux", "darwin"} {
		if ok, detail := loginCheckOn(goos, l); !ok || !strings.HasPrefix(detail, "logged in: ") {
			t.Errorf("%s, the file: %v %q", goos, ok, detail)
		}
	}
}
