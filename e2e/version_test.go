package e2e

import (
	"debug/buildinfo"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestVersionStamped: `make build` stamps the version from git describe,
// and the binary prints it with `version`, `--version` and `version --json`.
func TestVersionStamped(t *testing.T) {
	out, err := exec.Command("make", "-s", "-n", "build", "VERSION=v1.2.3-rc1").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n build: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), `-ldflags "-X main.version=v1.2.3-rc1"`) {
		t.Fatalf("make build does not stamp the version:\n%s", out)
	}
	out, err = exec.Command("make", "-s", "-n", "build").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n build: %v\n%s", err, out)
	}
	desc, err := exec.Command("git", "describe", "--tags", "--always", "--dirty").Output()
	if err != nil {
		t.Fatalf("git describe: %v", err)
	}
	if want := "-X main.version=" + strings.TrimSpace(string(desc)); !strings.Contains(string(out), want) {
		t.Fatalf("make build stamps %q, want git describe's %q", out, want)
	}

	bin := filepath.Join(t.TempDir(), "bhw-run")
	build := exec.Command("go", "build", "-ldflags", "-X main.version=v1.2.3-rc1", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, err := exec.Command(bin, args...).Output()
		if err != nil || string(out) != "bhw-run v1.2.3-rc1\n" {
			t.Errorf("bhw-run %v: %q %v, want the stamped version", args, out, err)
		}
	}
	out, err = exec.Command(bin, "version", "--json").Output()
	var v struct{ Version, Go string } // what `bhw-run version --json` prints
	if err != nil || json.Unmarshal(out, &v) != nil || v.Version != "v1.2.3-rc1" || !strings.HasPrefix(v.Go, "go") {
		t.Errorf("version --json: %q %v", out, err)
	}
}

// TestVersionFromBuildInfo: a build that nobody stamped (`go install`, a
// plain `go build` in a checkout) prints what Go recorded of its source,
// never just "dev".
func TestVersionFromBuildInfo(t *testing.T) {
	src := t.TempDir()
	files, err := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "*.go", "go.mod", "go.sum").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, f := range strings.Fields(string(files)) {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			continue // listed but deleted in the work tree
		}
		if err := os.MkdirAll(filepath.Join(src, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = src
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "-m", "snapshot")
	bin := filepath.Join(t.TempDir(), "bhw-run")
	build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	// Go records a pseudo-version of the commit as the module's version
	// (older Go: only the revision, which buildVersion shows as dev-<rev>).
	if !regexp.MustCompile(`^bhw-run (v0\.0\.0-\d{14}-[0-9a-f]{12}|dev-[0-9a-f]{12})\n$`).Match(out) {
		t.Fatalf("version = %q, want the recorded commit", out)
	}
}

// TestBuildLeavesOutTheDocsGenerator: the binary the tests run, built as
// make builds it, has no markdown parser in it: urfave/cli is built with
// urfave_cli_no_docs (the Makefile's GOFLAGS), since the parser's package
// initialisation would cost every bhw-run process CPU at start.
func TestBuildLeavesOutTheDocsGenerator(t *testing.T) {
	info, err := buildinfo.ReadFile(bhwBin)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range info.Deps {
		if strings.Contains(d.Path, "blackfriday") || strings.Contains(d.Path, "md2man") {
			t.Errorf("the built binary links %s: build it with -tags urfave_cli_no_docs", d.Path)
		}
	}
	out, err := exec.Command("make", "-s", "--no-print-directory", "-p", "-n", "build").CombinedOutput()
	if err != nil {
		t.Fatalf("make -p -n build: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`(?m)^GOFLAGS := .*-tags=(\S*,)?urfave_cli_no_docs\b`).Match(out) {
		t.Error("the Makefile does not export GOFLAGS with -tags=urfave_cli_no_docs")
	}
}
