package run

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/agent/agenttest"
	"github.com/blobhub/bhw-run/confine"
	"github.com/blobhub/bhw-run/exit"
)

// otherProfile is a home whose ~/.blobhub-worker holds another profile's
// state tree (staging) beside this run's, with the config.yaml whose
// executables and confine mode that profile's next run obeys.
func otherProfile(t *testing.T) (home, staging string) {
	t.Helper()
	home, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	staging = filepath.Join(home, ".blobhub-worker", "profiles", "staging")
	if err := os.MkdirAll(filepath.Join(staging, "inside"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(staging, "config.yaml"), []byte(confineOriginal), 0o600); err != nil {
		t.Fatal(err)
	}
	return home, staging
}

const confineOriginal = "confine: {mode: on}\n"

// TestWorkFolderOtherProfile: a thread whose work folder is, contains or
// lies in another profile's state tree (any of ~/.blobhub-worker) fails
// WORK_FOLDER_NOT_ALLOWED, the agent never started: its agent would write
// that profile's config.yaml.
func TestWorkFolderOtherProfile(t *testing.T) {
	home, staging := otherProfile(t)
	for name, wf := range map[string]string{
		"the other profile":        staging,
		"inside the other profile": filepath.Join(staging, "inside"),
		"the profiles folder":      filepath.Dir(staging),
		"~/.blobhub-worker":        filepath.Join(home, ".blobhub-worker"),
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, false)
			h.runner = func(r *Runner) { r.Setup.Home = home }
			const alias = "prod/t"
			h.srv.Put(alias, envelopeWith(wf, nil))
			h.srv.PersonPost(alias, "please start")
			h.play(agenttest.Script{Turns: [][]agenttest.Step{{{Text: "the agent ran"}}}})
			sum := h.run(alias)
			wantCode(t, sum, exit.Failed, exit.CodeWorkFolderNotAllowed)
			if !strings.Contains(sum.Error.Message, "every profile") {
				t.Errorf("message %q does not say why", sum.Error.Message)
			}
		})
	}
}

// TestConfineOtherProfile: the agent of one profile's thread can neither
// read nor write another profile's state tree: the kernel refuses the
// cat and the write of staging's config.yaml.
func TestConfineOtherProfile(t *testing.T) {
	home, staging := otherProfile(t)
	h := newHarness(t, false)
	r := &Runner{Setup: h.setup()}
	r.Setup.Home = home
	res := &resolved{Type: testAgent, adapter: &r.Setup.Adapters[0], WorkFolder: h.work, Confined: true}
	res.Home = home
	rules, _, done, err := r.confinement(res)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	cfg := filepath.Join(staging, "config.yaml")
	if rd, wr := rules.Grants(cfg); rd || wr {
		t.Errorf("the rule set grants %s: read %v write %v", cfg, rd, wr)
	}
	if confine.ABI() == 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("this kernel has no Landlock; the probe needs it")
		}
		t.Skip("no Landlock to probe the kernel with")
	}
	cmd := exec.Command("/bin/sh", "-c", "cat "+cfg+"; echo 'confine: {mode: off}' > "+cfg+"; echo probed")
	cmd.Dir, cmd.Env = h.work, []string{"PATH=/usr/bin:/bin"}
	f, err := confine.Wrap(cmd, *rules)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, _ := cmd.CombinedOutput()
	if strings.Count(string(out), "Permission denied") != 2 || !strings.Contains(string(out), "probed") {
		t.Errorf("output %q, want the read and the write refused", out)
	}
	if b, _ := os.ReadFile(cfg); string(b) != confineOriginal {
		t.Errorf("staging's config.yaml is now %q", b)
	}
}
