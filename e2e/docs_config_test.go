package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/blobhub/bhw-run/setup"
)

// TestDocsConfigExample: blobhub-worker's documented config.yaml
// (testdata/docs/config.yaml, from its configuration page) loads as it
// is with the adapters this build lists: its agents block is Claude
// Code's, its polling block is read and set aside as the daemon's.
func TestDocsConfigExample(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join("e2e", "testdata", "docs", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := setup.Resolve(setup.Options{APIURL: "file://" + dir, StateDir: dir, ConfigPath: path, Home: dir, Adapters: adapters}, "")
	if err != nil {
		t.Fatalf("the documented config.yaml: %v", err)
	}
	cc := s.Config.Agents["claude_code"]
	if s.Section.Name != "backend-feature" || s.Section.Session.SessionID != "ses_01J..." || cc == nil ||
		cc.Executable != "claude" || cc.Model != "claude-sonnet-4-6" || cc.Effort != "high" || cc.Permissions != "approval" ||
		s.Config.Concurrency.MaxAgents != 4 {
		t.Fatalf("read %+v (claude_code %+v)", s, cc)
	}
	if !slices.Equal(s.Ignored, []string{"polling"}) {
		t.Fatalf("ignored %v, want [polling]", s.Ignored)
	}
}
