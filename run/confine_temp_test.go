package run

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/confine"
)

// TestAgentTempFolders: every agent's private temp folder lies in one
// parent that every agent is denied whole but for its own: agent A reads
// neither the scratch files of agent B, started after A (-P4), nor the
// private CLAUDE.md copy of an unconfined Claude thread, and still
// writes its own TMPDIR.
func TestAgentTempFolders(t *testing.T) {
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", tmp)
	copyDir := filepath.Join(tmp, claudeMDPrefix+"123")
	if err := os.Mkdir(copyDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(copyDir, "CLAUDE.md"), []byte("other thread's rules\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, false)
	r := &Runner{Setup: h.setup()}
	start := func() (*confine.Rules, string, func()) {
		t.Helper()
		res := &resolved{Type: testAgent, adapter: &r.Setup.Adapters[0], WorkFolder: h.work, Confined: true}
		res.Home = h.state
		rules, temp, done, err := r.confinement(res)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(done)
		return rules, temp, done
	}
	rulesA, tempA, _ := start()
	_, tempB, _ := start() // started after A
	if filepath.Dir(tempA) != filepath.Dir(tempB) {
		t.Fatalf("two parents: %s and %s", tempA, tempB)
	}
	scratch := filepath.Join(tempB, "scratch.txt")
	if err := os.WriteFile(scratch, []byte("B's scratch\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{scratch, filepath.Join(copyDir, "CLAUDE.md")} {
		if rd, _ := rulesA.Grants(p); rd {
			t.Errorf("agent A's rule set grants reading %s", p)
		}
	}
	if confine.ABI() == 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("this kernel has no Landlock; the probe needs it")
		}
		t.Skip("no Landlock to probe the kernel with")
	}
	cmd := exec.Command("/bin/sh", "-c", "cat "+scratch+" "+filepath.Join(copyDir, "CLAUDE.md")+"; echo mine > $TMPDIR/x && cat $TMPDIR/x")
	cmd.Dir, cmd.Env = h.work, []string{"PATH=/usr/bin:/bin", "TMPDIR=" + tempA}
	f, err := confine.Wrap(cmd, *rulesA)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, _ := cmd.CombinedOutput()
	if strings.Contains(string(out), "B's scratch") || strings.Contains(string(out), "thread's rules") || strings.Count(string(out), "Permission denied") != 2 ||
		!strings.Contains(string(out), "mine") {
		t.Errorf("output %q, want B's scratch and the copy refused, A's own TMPDIR written", out)
	}
}
