package e2e

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/internal/sysdeps"
	"github.com/blobhub/bhw-run/run"
	"github.com/blobhub/bhw-run/setup"
)

// logrotateRecipe is contrib/logrotate/bhw-run read as logrotate reads it:
// the path patterns before the block and the directives inside it.
type logrotateRecipe struct {
	patterns   []string
	directives map[string][]string
}

// recipeStateTree is the state tree the recipe's paths name, which an
// install replaces by its own.
const recipeStateTree = "/home/bhw/.blobhub-worker/profiles/default"

func readLogrotateRecipe(t *testing.T) logrotateRecipe {
	t.Helper()
	f, err := os.Open("contrib/logrotate/bhw-run")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := logrotateRecipe{directives: map[string][]string{}}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case line == "{":
			in = true
		case line == "}":
			in = false
		case in:
			fields := strings.Fields(line)
			r.directives[fields[0]] = fields[1:]
		default:
			r.patterns = append(r.patterns, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestContribLogrotate: the recipe rotates thread.log and section.log of
// every thread, however deep its alias (up to eight segments), by
// copytruncate, since bhw-run keeps appending to the file it opened; and,
// where logrotate is installed, `logrotate -f` on a state tree rotates them
// and the next run appends to the emptied file from its start.
func TestContribLogrotate(t *testing.T) {
	r := readLogrotateRecipe(t)
	for _, d := range []string{"copytruncate", "missingok", "notifempty"} {
		if _, ok := r.directives[d]; !ok {
			t.Errorf("the recipe lacks %s", d)
		}
	}
	for _, d := range []string{"create", "postrotate", "prerotate", "olddir", "dateext"} {
		if _, ok := r.directives[d]; ok {
			t.Errorf("the recipe has %s: a rotation by rename, or files moved, under a run that keeps appending", d)
		}
	}

	e := newE2E(t)
	e.useFileStore()
	e.fakeClaudeDone()
	aliases := []string{"solo", "p1/t", "projects/p1/t1", "a/b/c/d/e/f/g/h"}
	for _, alias := range aliases {
		e.handOff(alias, claudeType, "", "please")
		e.activate(alias, 0, run.OutcomeTurnCompleted)
	}
	logs := []string{filepath.Join(e.jobDir(), "logs", "section.log")}
	for _, alias := range aliases {
		logs = append(logs, filepath.Join(setup.ThreadDir(e.jobDir(), alias), "logs", "thread.log"))
	}
	for _, l := range logs {
		var hits []string
		for _, p := range r.patterns {
			rel, ok := strings.CutPrefix(p, recipeStateTree+"/")
			if !ok {
				t.Fatalf("pattern %q is not under %s, the state tree the recipe tells to replace", p, recipeStateTree)
			}
			if ok, err := filepath.Match(filepath.Join(e.state, rel), l); err != nil {
				t.Fatal(err)
			} else if ok {
				hits = append(hits, p)
			}
		}
		if len(hits) != 1 {
			t.Errorf("%s is matched by %d patterns of the recipe (%q), want 1", l, len(hits), hits)
		}
	}

	lr := sysdeps.Path(t, "logrotate")
	recipe, err := os.ReadFile("contrib/logrotate/bhw-run")
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(e.root, "bhw-run.logrotate")
	if err := os.WriteFile(conf, bytes.ReplaceAll(recipe, []byte(recipeStateTree), []byte(e.state)), 0o644); err != nil {
		t.Fatal(err)
	}
	before := map[string][]byte{}
	inode := map[string]uint64{}
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil || len(b) == 0 {
			t.Fatalf("%s: %d bytes, %v", l, len(b), err)
		}
		before[l] = b
		inode[l] = inodeOf(t, l)
	}
	out, err := exec.Command(lr, "-f", "-s", filepath.Join(e.root, "logrotate.status"), conf).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("logrotate -f: %v\n%s", err, out)
	}
	for _, l := range logs {
		rotated, err := os.ReadFile(l + ".1")
		if err != nil || !bytes.Equal(rotated, before[l]) {
			t.Errorf("%s.1: %d bytes (%v), want the %d bytes the log held", l, len(rotated), err, len(before[l]))
		}
		if st, err := os.Stat(l); err != nil || st.Size() != 0 || inodeOf(t, l) != inode[l] {
			t.Errorf("%s after the rotation: %v %v, want the same file emptied", l, st, err)
		}
	}
	// The next run appends to the emptied file from its start.
	e.post("p1/t", "again")
	e.activate("p1/t", 0, run.OutcomeTurnCompleted)
	l := filepath.Join(setup.ThreadDir(e.jobDir(), "p1/t"), "logs", "thread.log")
	b, err := os.ReadFile(l)
	if err != nil || len(b) == 0 || bytes.IndexByte(b, 0) >= 0 {
		t.Fatalf("thread.log after the next run: %d bytes, %v (NUL bytes: a write past the old end)", len(b), err)
	}
	first, _, _ := bytes.Cut(b, []byte("\n"))
	if _, _, _, ok := agent.ParseLogLine(string(first)); !ok {
		t.Fatalf("the emptied thread.log starts with %q, not a log line", first)
	}
	if !slices.ContainsFunc(strings.Split(string(b), "\n"), func(s string) bool { return strings.Contains(s, " stdin ") && strings.Contains(s, "again") }) {
		t.Fatal("the next turn is not in the emptied thread.log")
	}
}

func inodeOf(t *testing.T, path string) uint64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Ino
}
