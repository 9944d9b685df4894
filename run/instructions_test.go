package run

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/setup"
)

// TestInstructionsReadInsideTheWorkFolder: an adapter's instructions file
// (CLAUDE.md) reaches Start as the bytes run read, under approval and
// guarded only; a link out of the work folder, a hard link or a file too
// large is not passed on and one status item says why; the agent runs all
// the same.
func TestInstructionsReadInsideTheWorkFolder(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret.txt")
	writeFile(t, outside, "OUTSIDE-SECRET", 0o600)
	for _, tc := range []struct {
		name, posture string
		setup         func(work string)
		want          string // "" for nothing passed
		reason        string // the status item's reason, "" for none
	}{
		{"a file", setup.PermApproval, func(w string) { writeFile(t, filepath.Join(w, "CLAUDE.md"), "RULES", 0o644) }, "RULES", ""},
		{"a link inside", setup.PermApproval, func(w string) {
			writeFile(t, filepath.Join(w, "docs", "AGENTS.md"), "SHARED RULES", 0o644)
			symlink(t, "docs/AGENTS.md", filepath.Join(w, "CLAUDE.md"))
		}, "SHARED RULES", ""},
		{"a link out", setup.PermApproval, func(w string) { symlink(t, outside, filepath.Join(w, "CLAUDE.md")) }, "", "a link out of the folder"},
		{"a relative link out", setup.PermApproval, func(w string) { symlink(t, "../../../../../../../../.."+outside, filepath.Join(w, "CLAUDE.md")) }, "", "a link out of the folder"},
		{"a hard link", setup.PermApproval, func(w string) {
			if err := os.Link(outside, filepath.Join(w, "CLAUDE.md")); err != nil {
				t.Fatal(err)
			}
		}, "", "hardlink"},
		{"too large", setup.PermApproval, func(w string) {
			writeFile(t, filepath.Join(w, "CLAUDE.md"), strings.Repeat("x", maxInstructions+1), 0o644)
		}, "", "larger than 1048576 bytes"},
		{"none", setup.PermApproval, func(string) {}, "", ""},
		{"autonomous", setup.PermAutonomous, func(w string) { symlink(t, outside, filepath.Join(w, "CLAUDE.md")) }, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, false)
			tc.setup(h.work)
			var got []byte
			started := 0
			h.runner = func(r *Runner) {
				for i := range r.Setup.Adapters {
					r.Setup.Adapters[i].Instructions = "CLAUDE.md"
				}
				wrapStart(r, testAgent, func(next startFunc) startFunc {
					return func(ctx context.Context, l agent.Launch) (agent.Session, error) {
						got, started = l.Instructions, started+1
						return next(ctx, l)
					}
				})
			}
			const alias = "projects/p1/instructions"
			h.handOff(alias, tc.posture, "hi")
			h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "ran"}}}})
			want(t, h.run(alias), OutcomeTurnCompleted, exit.OK)
			if started != 1 || string(got) != tc.want || (tc.want == "") != (got == nil) {
				t.Fatalf("Start got %q (started %d), want %q", got, started, tc.want)
			}
			var reasons []string
			for _, it := range h.srv.Items(alias) {
				var m map[string]any
				_ = json.Unmarshal(it.Metadata, &m)
				if m["type"] == "status" && m["status"] == "instructions_skipped" {
					reasons = append(reasons, m["reason"].(string))
				}
			}
			if tc.reason == "" && len(reasons) != 0 || tc.reason != "" && (len(reasons) != 1 || reasons[0] != tc.reason) {
				t.Fatalf("instructions_skipped reasons %q, want %q", reasons, tc.reason)
			}
		})
	}
}

func symlink(t *testing.T, target, name string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
}
