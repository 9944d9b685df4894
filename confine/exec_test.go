package confine

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestStrayTrampolineVariableNoRuleSet: a BHW_CONFINE_FD a person left in the
// environment (not the descriptor of a rule set Wrap made) is dropped, and
// the program runs as itself rather than failing every command with 126.
func TestStrayTrampolineVariableNoRuleSet(t *testing.T) {
	for _, v := range []string{"0", "1", "5", "x", ""} {
		cmd := exec.Command("/proc/self/exe", "-test.run=^TestNothingAtAll$")
		cmd.Env = []string{trampolineEnv + "=" + v}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%s=%q: %v\n%s", trampolineEnv, v, err, out)
		}
	}
}

// TestTrampolineClosesInherited: a descriptor the starting program holds
// open without close-on-exec (as bhw-run inherits one from a careless
// `7<credentials.yaml`) does not reach the confined program.
func TestTrampolineClosesInherited(t *testing.T) {
	needLandlock(t)
	root := tree(t, "work/", "tmp/", "secret/key")
	secret, err := os.Open(root + "/secret/key")
	if err != nil {
		t.Fatal(err)
	}
	defer secret.Close()
	rules, err := Build(Spec{WorkFolder: root + "/work", Temp: root + "/tmp", Deny: []string{root + "/secret"}})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", "cat <&3 && echo LEAKED; ls /proc/self/fd")
	cmd.ExtraFiles = []*os.File{secret} // fd 3 in the child, as inherited
	f, err := Wrap(cmd, rules)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, _ := cmd.CombinedOutput()
	if strings.Contains(string(out), "LEAKED") {
		t.Fatalf("the confined program read an inherited descriptor:\n%s", out)
	}
}
