package run_test

import (
	"bufio"
	"bytes"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// module is bhw-run's module path; the design's rows name packages below it.
const module = "github.com/blobhub/bhw-run"

// importRules reads the table of docs/design.md's "Which way dependencies
// point": each row names packages (a "dir/..." row covers everything
// below dir) and what they may import of bhw-run's ("any", "none", or a
// list), their non-test files that is. A row that no longer parses fails the test rather than allowing
// everything.
func importRules(t *testing.T) map[string][]string {
	t.Helper()
	section := designSection(t, "Which way dependencies point")
	row := regexp.MustCompile("^\\| (`[^|]+`) \\| ([^|]+) \\|$")
	name := regexp.MustCompile("`([^`]+)`")
	rules := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(section))
	for sc.Scan() {
		m := row.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		var allowed []string
		// "any" and "none" may be followed by a remark.
		switch may := strings.TrimSpace(m[2]); {
		case strings.HasPrefix(may, "any"):
			allowed = []string{"any"}
		case strings.HasPrefix(may, "none"):
			allowed = []string{}
		default:
			for _, n := range name.FindAllStringSubmatch(may, -1) {
				allowed = append(allowed, n[1])
			}
			if len(allowed) == 0 {
				t.Fatalf("docs/design.md row %q: say any, none or the packages in backquotes", sc.Text())
			}
		}
		for _, n := range name.FindAllStringSubmatch(m[1], -1) {
			rules[n[1]] = allowed
		}
	}
	if len(rules) < 15 {
		t.Fatalf("found only %d packages in docs/design.md's import table: the parse is broken", len(rules))
	}
	return rules
}

// ruleFor is the row of pkg (relative to the module, "main" for the root):
// its own, else the nearest "dir/..." above it.
func ruleFor(rules map[string][]string, pkg string) ([]string, bool) {
	if r, ok := rules[pkg]; ok {
		return r, true
	}
	for dir := pkg; dir != "." && dir != "/"; dir = filepath.Dir(dir) {
		if r, ok := rules[dir+"/..."]; ok {
			return r, true
		}
	}
	return nil, false
}

// TestImportsAsDesigned: every package of the module imports, of
// bhw-run's own packages, only what docs/design.md's table allows it, and
// every package has a row, so the map of the rooms and the rules it states
// stay true.
func TestImportsAsDesigned(t *testing.T) {
	rules := importRules(t)
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	short := func(p string) string {
		if p == module {
			return "main"
		}
		return strings.TrimPrefix(p, module+"/")
	}
	seen := 0
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		pkg := short(fields[0])
		seen++
		allowed, ok := ruleFor(rules, pkg)
		if !ok {
			t.Errorf("package %s has no row in docs/design.md's import table; add one saying what it may import", pkg)
			continue
		}
		if slices.Contains(allowed, "any") {
			continue
		}
		for _, imp := range fields[1:] {
			if imp != module && !strings.HasPrefix(imp, module+"/") {
				continue
			}
			if dep := short(imp); !slices.Contains(allowed, dep) {
				t.Errorf("%s imports %s, which docs/design.md does not allow it (its row allows: %s)", pkg, dep, strings.Join(allowed, ", "))
			}
		}
	}
	if seen < 15 {
		t.Fatalf("go list named only %d packages:\n%s", seen, out)
	}
}
