package confine

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Grants is what the rule set lets the agent do with path p (absolute,
// as the kernel sees it: links resolved): read it, and write it. A path
// below a granted folder is granted as the folder is.
func (r Rules) Grants(p string) (read, write bool) {
	for _, g := range r.Paths {
		if within(g.Path, p) && (!g.File || g.Path == p) {
			read = true
			write = write || g.Write
		}
	}
	return read, write
}

// Refusal is a path a tool was refused that the confinement refuses:
// Denied when the rule set grants no read there (bhw-run's secrets and
// records, other threads' folders, the folders on the way to them),
// else the agent may read it but not write it.
type Refusal struct {
	Path   string // as the tool's output names it
	Denied bool
}

// maxRefusals bounds the refusals one output is searched for.
const maxRefusals = 8

// refusedMarkers are how a refused access reads in a tool's output: the
// C library's texts of EACCES and EPERM, and the names Node.js and others
// print.
var refusedMarkers = []string{"permission denied", "operation not permitted", "eacces", "eperm"}

// pathRE is an absolute path in a line of output: it ends at a space,
// a quote (ASCII or typographic), a colon or a comma, as the tools
// quote or follow a path in their messages. Compiled on first use: the
// trampoline and every bhw-run process load this package.
var pathRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("/[^\\s'\"`‘’“”:,;()\\[\\]]*") })

// Refused reads a tool's output for the paths it says were refused —
// a line saying "Permission denied" or "Operation not permitted" (or
// EACCES, EPERM) and the absolute path it names next to that: the first
// after it (Node.js, Python: "permission denied, open '/p'"), else the
// last before it (coreutils, the shells: "cat: /p: Permission denied").
// A path counts only where the confinement accounts for the refusal:
// the rule set refuses it (Grants), and bhw-run's user, unconfined,
// could have done it (access(2): read a denied path that exists, write
// one the rules do not let it write, or create it in its folder). So a
// refusal the user's own permissions explain (/etc/shadow, a read-only
// file in the work folder) is none of the confinement's. At most a few
// distinct paths, in the output's order.
func (r Rules) Refused(output string) []Refusal { return r.refused(output, unix.Access) }

// refused is Refused asking access (access(2), or a test's stand-in).
func (r Rules) refused(output string, access func(path string, mode uint32) error) []Refusal {
	var out []Refusal
	seen := map[string]bool{}
	for _, line := range strings.Split(output, "\n") {
		p := refusedPath(line)
		if p == "" || seen[p] {
			continue
		}
		seen[p] = true
		if denied, ok := r.refuses(p, access); ok {
			out = append(out, Refusal{Path: p, Denied: denied})
			if len(out) == maxRefusals {
				break
			}
		}
	}
	return out
}

// refusedPath is the path line says was refused, "" for none.
func refusedPath(line string) string {
	lower := strings.ToLower(line)
	at := -1
	for _, m := range refusedMarkers {
		if i := strings.Index(lower, m); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	if at < 0 {
		return ""
	}
	var before, after string
	for _, loc := range pathRE().FindAllStringIndex(line, -1) {
		switch {
		case loc[1] <= at:
			before = line[loc[0]:loc[1]]
		case loc[0] > at && after == "":
			after = line[loc[0]:loc[1]]
		}
	}
	p := after
	if p == "" {
		p = before
	}
	p = strings.TrimRight(p, ".")
	if len(p) < 2 {
		return ""
	}
	return filepath.Clean(p)
}

// refuses reports whether the confinement accounts for a refusal of p,
// and whether the rules deny p outright.
func (r Rules) refuses(p string, access func(string, uint32) error) (denied, ok bool) {
	real := resolve(p)
	read, write := r.Grants(real)
	switch {
	case !read:
		return true, userMay(real, unix.R_OK, access)
	case !write:
		return false, userMay(real, unix.W_OK, access)
	}
	return false, false
}

// userMay reports whether bhw-run's user may read (unix.R_OK) or write
// (unix.W_OK) p, as access(2) says; for a missing p, whether it may
// create it in its nearest existing folder.
func userMay(p string, mode uint32, access func(string, uint32) error) bool {
	if _, err := os.Lstat(p); err == nil {
		return access(p, mode) == nil
	}
	for dir := filepath.Dir(p); ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(dir); err == nil {
			return access(dir, unix.W_OK) == nil
		}
		if dir == "/" {
			return false
		}
	}
}
