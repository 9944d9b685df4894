package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/internal/sysdeps"
)

// TestCompletionBashAliases: where a command takes an existing thread's
// alias, bash offers the aliases of the threads the state trees hold (a
// folder with a thread.yaml), from disk; not for thread new, whose alias
// is a new one, nor after the alias.
func TestCompletionBashAliases(t *testing.T) {
	p := script(t, "bash")
	home := t.TempDir()
	for _, rel := range []string{
		".blobhub-worker/profiles/prod/jobs/job-ses_1/threads/demo/t1",
		".blobhub-worker/profiles/prod/jobs/job-ses_1/threads/demo/t2",
		".blobhub-worker/profiles/local-1/jobs/job-ses_2/threads/app/readme",
	} {
		dir := filepath.Join(home, rel)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "thread.yaml"), []byte("alias: x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A folder on the way to a thread is no thread.
	if err := os.MkdirAll(filepath.Join(home, ".blobhub-worker/profiles/prod/jobs/job-ses_1/threads/empty/x"), 0o700); err != nil {
		t.Fatal(err)
	}
	complete := func(env []string, words ...string) []string {
		t.Helper()
		cmd := exec.Command(sysdeps.Path(t, "bash"), append([]string{"-c", `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($#-1)); _bhw_run; printf '%s\n' "${COMPREPLY[@]}"`, "_", p}, words...)...)
		cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=" + home, "LANG=C.UTF-8"}, env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		got := strings.Fields(string(out))
		slices.Sort(got)
		return got
	}
	for _, tc := range []struct {
		env   []string
		words []string
		want  []string
	}{
		{nil, []string{"bhw-run", "demo/"}, []string{"demo/t1", "demo/t2"}},
		{nil, []string{"bhw-run", "thread", "show", ""}, []string{"app/readme", "demo/t1", "demo/t2"}},
		{nil, []string{"bhw-run", "thread", "post", "a"}, []string{"app/readme"}},
		{nil, []string{"bhw-run", "run", "--", "demo/t"}, []string{"demo/t1", "demo/t2"}},
		{nil, []string{"bhw-run", "thread", "new", "demo/"}, nil},
		{nil, []string{"bhw-run", "thread", "post", "demo/t1", ""}, nil},
		{[]string{"BHW_STATE_DIR=" + filepath.Join(home, ".blobhub-worker/profiles/local-1")}, []string{"bhw-run", "policy", "explain", ""}, []string{"app/readme"}},
	} {
		if got := complete(tc.env, tc.words...); !slices.Equal(got, tc.want) {
			t.Errorf("%q %v: bash offers %q, want %q", tc.words, tc.env, got, tc.want)
		}
	}
}
