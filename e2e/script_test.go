package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestScripts runs the whole-CLI scenarios in testdata/script/*.txtar
// against the built binary on a local store: the commands a person types,
// their exact exit codes, their output and the files they leave.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "e2e/testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("PATH", filepath.Dir(bhwBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
			env.Setenv("HOME", env.WorkDir+"/home")
			env.Setenv("BLOBHUB_API_URL", "file://"+env.WorkDir+"/store")
			env.Setenv("BHW_REVISION_ID", "rev_local")
			env.Setenv("BHW_SESSION_ID", "ses_local")
			env.Setenv("BHW_LOG_FORMAT", "json")
			return os.MkdirAll(env.WorkDir+"/home", 0o700)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// exit N cmd args...: run cmd and require exit code N exactly
			// (testscript's own `! exec` only knows zero and non-zero).
			"exit": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) < 2 {
					ts.Fatalf("usage: exit N command [args...]")
				}
				want, err := strconv.Atoi(args[0])
				if err != nil {
					ts.Fatalf("exit: %v", err)
				}
				name := args[1]
				if name == "bhw-run" {
					name = bhwBin
				}
				cmd := exec.Command(name, args[2:]...)
				// Fed to the script's stdout/stderr matchers.
				cmd.Stdout, cmd.Stderr = ts.Stdout(), ts.Stderr()
				cmd.Dir = ts.Getenv("WORK")
				for _, k := range []string{"PATH", "HOME", "BLOBHUB_API_URL", "BHW_REVISION_ID", "BHW_SESSION_ID", "BHW_LOG_FORMAT", "BHW_CONFIG"} {
					if v := ts.Getenv(k); v != "" {
						cmd.Env = append(cmd.Env, k+"="+v)
					}
				}
				err = cmd.Run()
				got := 0
				if ee, ok := err.(*exec.ExitError); ok {
					got = ee.Sys().(syscall.WaitStatus).ExitStatus()
				} else if err != nil {
					ts.Fatalf("exit: %v", err)
				}
				if got != want {
					ts.Fatalf("%v: exit %d, want %d", args[1:], got, want)
				}
			},
		},
	})
}
