package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestDocsConfigExample: blobhub-worker's documented config.yaml
// (testdata/docs/config.yaml, from its configuration page) loads as it
// is with the adapters this build lists: its agents block is Claude
// Code's, its polling block is read and set aside as the daemon's.
func TestDocsConfigExample(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("e2e", "testdata", "docs", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := resolveConfig(t, b, "")
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
