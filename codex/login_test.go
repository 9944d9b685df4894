package codex

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent"
)

// TestLoginCheckKeyring: a config.toml that keeps Codex's login in the
// system keyring (the Keychain on a Mac) makes a missing auth.json "not
// checked", never "not logged in"; without it a missing auth.json is a
// missing login, and auth.json is found either way.
func TestLoginCheckKeyring(t *testing.T) {
	home := t.TempDir()
	l := agent.Launch{Home: home}
	if ok, detail := loginCheck(l); ok || !strings.HasPrefix(detail, "not logged in: ") {
		t.Errorf("nothing: %v %q", ok, detail)
	}
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte("model = \"o3\"\ncli_auth_credentials_store = \"keyring\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if ok, detail := loginCheck(l); !ok || !strings.HasPrefix(detail, "not checked: ") || !strings.Contains(detail, `"keyring"`) {
		t.Errorf("keyring: %v %q", ok, detail)
	}
	if err := os.WriteFile(filepath.Join(home, "auth.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if ok, detail := loginCheck(l); !ok || !strings.HasPrefix(detail, "logged in: ") {
		t.Errorf("auth.json: %v %q", ok, detail)
	}
}
