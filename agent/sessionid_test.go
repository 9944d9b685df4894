package agent

import (
	"regexp"
	"testing"
)

// TestNewSessionID: a version 4 UUID in its canonical spelling, what
// Claude Code's --session-id takes, and a new one each time.
func TestNewSessionID(t *testing.T) {
	v4 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 100 {
		id := NewSessionID()
		if !v4.MatchString(id) {
			t.Fatalf("NewSessionID() = %q, not a version 4 UUID", id)
		}
		if seen[id] {
			t.Fatalf("NewSessionID() gave %q twice", id)
		}
		seen[id] = true
	}
}
