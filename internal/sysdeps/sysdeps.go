// Package sysdeps finds, for the tests, the commands they run beyond Go and
// the agent CLIs: the Debian packages `make sysdeps` installs (SYSDEPS in
// the Makefile). Both cli's tests (the completion scripts, the man page)
// and e2e's (tmux, logrotate, systemd-analyze) need the one list and the
// one way to fail, so it is a package of its own; nothing but tests
// imports it.
package sysdeps

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// packages is the Debian package of each command the tests run.
var packages = map[string]string{
	"bash": "bash", "tmux": "tmux", "zsh": "zsh", "fish": "fish", "groff": "groff-base", "man": "man-db",
	"logrotate": "logrotate", "systemd-analyze": "systemd",
}

// Path is the path of a command of packages, found on PATH or in /usr/sbin
// and /sbin (logrotate's place, off a plain user's PATH). A missing one
// fails the test with what to install (a test never falls back to a
// weaker check), under CI and under `make test`; a bare `go test` skips it
// saying what to install.
func Path(t testing.TB, name string) string {
	t.Helper()
	pkg, ok := packages[name]
	if !ok {
		t.Fatalf("sysdeps.Path(%q): add the command and its Debian package to sysdeps' packages and the Makefile's SYSDEPS", name)
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		if p, err := exec.LookPath(filepath.Join(dir, name)); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "" && os.Getenv("BHW_SYSDEPS") == "" {
		// A bare `go test ./...` by a newcomer, without `make test` (which
		// installs them and sets BHW_SYSDEPS): said, not failed. Under CI,
		// and under make, a missing one fails.
		t.Skipf("%s is not installed (apt-get install %s; `make test` installs it)", name, pkg)
	}
	t.Fatalf("%s is not installed; run `make sysdeps` as root, or apt-get install %s", name, pkg)
	return ""
}
