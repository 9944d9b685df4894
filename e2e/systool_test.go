package e2e

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// sysPackage is the Debian package of each command the tests run beyond Go
// and the agent CLIs; make sysdeps installs them (SYSDEPS in the Makefile).
var sysPackage = map[string]string{
	"bash": "bash", "tmux": "tmux", "zsh": "zsh", "fish": "fish", "groff": "groff-base", "man": "man-db",
	"logrotate": "logrotate", "systemd-analyze": "systemd",
}

// sysTool is the path of a command of sysPackage, found on PATH or in
// /usr/sbin and /sbin (logrotate's place, off a plain user's PATH). A
// missing one fails the test with what to install: a test never falls
// back to a weaker check.
func sysTool(t *testing.T, name string) string {
	t.Helper()
	pkg, ok := sysPackage[name]
	if !ok {
		t.Fatalf("sysTool(%q): add the command and its Debian package to sysPackage and the Makefile's SYSDEPS", name)
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		if p, err := exec.LookPath(filepath.Join(dir, name)); err == nil {
			return p
		}
	}
	t.Fatalf("%s is not installed; run `make sysdeps` as root, or apt-get install %s", name, pkg)
	return ""
}
