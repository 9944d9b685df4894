// Package confine is the kernel boundary around an agent: the Landlock rule
// set that lets the agent process, and everything it starts, write only its
// work folder, its agent home, a private temp folder and what the machine
// owner adds, and read everything but bhw-run's secrets and records
// (docs/security.md has the rule set as a table).
//
// It is a room of its own because no existing one owns the concern: the
// rule set is built from run's knowledge of the state tree but applied by
// the process layer (agent/proc) to every adapter's agent, between fork
// and exec, and neither may own the other's half. Build turns a Spec into
// Rules, plain data a test can read; the trampoline (exec.go) applies them
// to itself and execs the agent. Linux only.
package confine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// NoLandlockEnv, set to 1 in bhw-run's environment, makes ABI report no
// Landlock: how the tests stand for a kernel without it.
const NoLandlockEnv = "BHW_TEST_NO_LANDLOCK"

// NetABI is the first Landlock ABI that can restrict TCP connects.
const NetABI = 4

// ScopeABI is the first Landlock ABI that scopes signals and abstract
// unix sockets to the domain: a confined agent can then neither signal
// a process outside it (kill -STOP of bhw-run, which would hold the
// thread's lock with no watchdog left) nor connect to an abstract socket
// that a process outside listens on.
const ScopeABI = 6

// scoped is what Apply scopes to the domain on a kernel of ABI abi:
// signals and abstract unix sockets from ScopeABI on, nothing before.
func scoped(abi int) landlock.ScopedSet {
	if abi < ScopeABI {
		return 0
	}
	return landlock.ScopedSet(llsys.ScopeAbstractUnixSocket | llsys.ScopeSignal)
}

// Scopes says, for a person, what the confinement does besides files on
// a kernel of ABI abi.
func Scopes(abi int) string {
	if abi < ScopeABI {
		return fmt.Sprintf("signals and abstract unix sockets not scoped (ABI %d needed)", ScopeABI)
	}
	return "signals and abstract unix sockets scoped to the agent"
}

// ABI is the running kernel's Landlock ABI version, 0 without Landlock
// (not built in, or not enabled at boot: `lsm=` lacks landlock).
func ABI() int {
	if os.Getenv(NoLandlockEnv) == "1" {
		return 0
	}
	v, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// Check says whether this kernel can apply s, and if not why.
func Check(s Spec) error {
	abi := ABI()
	switch {
	case abi == 0:
		return errors.New("this kernel has no Landlock (it needs Linux 5.13 or later with landlock in the boot-time lsm= list, e.g. lsm=landlock,lockdown,yama,apparmor)")
	case len(s.Ports) > 0 && abi < NetABI:
		return fmt.Errorf("this kernel's Landlock (ABI %d) cannot restrict network connections (ABI %d, Linux 6.7, can)", abi, NetABI)
	}
	return nil
}

// Spec is what one agent start may touch, as run knows it.
type Spec struct {
	// WorkFolder and Temp are read and written: the work folder and the
	// private temp folder. Both must exist.
	WorkFolder, Temp string
	// Writable are more folders or files the agent may read and write: its
	// own agent home, the machine owner's confine.writable. Missing ones
	// are skipped.
	Writable []string
	// Deny are never read nor written, whatever covers them: the
	// credentials files, the state tree, other threads' folders, the
	// machine owner's confine.deny. A Writable path inside one is still
	// writable (the thread's own agent home in the state tree).
	Deny []string
	// Ports, when set, are the only TCP ports the agent may connect to;
	// nil leaves the network alone.
	Ports []uint16
}

// Rule grants one path: read (and execute), or read and write, on the
// whole tree below a directory, or on one file.
type Rule struct {
	Path  string `json:"path"`
	Write bool   `json:"write,omitempty"`
	File  bool   `json:"file,omitempty"`
}

// Rules is a built rule set: everything not granted here is refused.
type Rules struct {
	Paths []Rule   `json:"paths"`
	Ports []uint16 `json:"ports,omitempty"`
}

// devices are what every program writes besides its folders: the null and
// terminal devices, and the shared-memory folder semaphores live in.
var devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/pts", "/dev/shm"}

// Build makes the rule set of s. Landlock only grants, so "read everything
// but the denied" is built as read grants on the paths that cover / and
// leave the denied trees out: walking down from / through each denied
// path's ancestors, every entry beside the way is granted whole, while
// the ancestors themselves get no rule. So the ancestors cannot be listed,
// and what is created in one of them later (beside a denied path) cannot
// be read: only what existed at the start is covered. Links are never
// granted: the kernel judges the path a link leads to by that path's own
// rules. Writable trees are built the same way, so a denied path inside
// one stays denied.
func Build(s Spec) (Rules, error) {
	for _, p := range []string{s.WorkFolder, s.Temp} {
		if p == "" {
			return Rules{}, errors.New("a confined agent needs a work folder and a temp folder")
		}
	}
	var deny []string
	for _, d := range s.Deny {
		if d = resolve(d); d != "" {
			deny = append(deny, d)
		}
	}
	b := &builder{}
	// Read: everything, but the denied trees.
	b.cover("/", deny, false)
	// Write: the agent's own folders, and the owner's.
	writable := append([]string{s.WorkFolder, s.Temp}, s.Writable...)
	for i, w := range writable {
		if w = resolve(w); w == "" {
			continue
		}
		if _, err := os.Stat(w); err != nil {
			if i < 2 {
				return Rules{}, fmt.Errorf("the agent's folder %s: %w", w, err)
			}
			continue
		}
		// What writable holds of a denied tree (its own agent home inside
		// the state tree) is the agent's: only denied paths below w count.
		var below []string
		for _, d := range deny {
			if d != w && within(w, d) {
				below = append(below, d)
			}
		}
		b.cover(w, below, true)
	}
	for _, d := range devices {
		if fi, err := os.Lstat(d); err == nil && fi.Mode()&os.ModeSymlink == 0 {
			b.add(Rule{Path: d, Write: true, File: !fi.IsDir()})
		}
	}
	return Rules{Paths: b.rules, Ports: s.Ports}, nil
}

type builder struct{ rules []Rule }

func (b *builder) add(r Rule) { b.rules = append(b.rules, r) }

// cover grants root's tree but the denied paths in it. Only the folders
// on the way to a denied path are listed.
func (b *builder) cover(root string, deny []string, write bool) {
	var inside []string
	for _, d := range deny {
		if within(d, root) {
			return // root itself is denied, or lies in a denied tree
		}
		if within(root, d) {
			inside = append(inside, d)
		}
	}
	fi, err := os.Lstat(root)
	if err != nil || fi.Mode()&os.ModeSymlink != 0 {
		return
	}
	if len(inside) == 0 || !fi.IsDir() {
		b.add(Rule{Path: root, Write: write, File: !fi.IsDir()})
		return
	}
	// A folder that cannot be listed grants nothing below it: its
	// entries cannot be named, and failing closed is the safe way.
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.Type()&os.ModeSymlink != 0 {
			continue
		}
		b.cover(filepath.Join(root, e.Name()), inside, write)
	}
}

// resolve is p absolute, cleaned and with its links resolved — Landlock
// judges the file a path reaches, so a denied path must be named as the
// kernel sees it. A missing path keeps its existing part resolved and the
// rest as written; "" for a relative or empty one.
func resolve(p string) string {
	if p == "" || !filepath.IsAbs(p) {
		return ""
	}
	p = filepath.Clean(p)
	var rest []string
	for dir := p; ; dir = filepath.Dir(dir) {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			slices.Reverse(rest)
			return filepath.Join(append([]string{real}, rest...)...)
		}
		if dir == "/" {
			return p
		}
		rest = append(rest, filepath.Base(dir))
	}
}

// within reports whether p is dir or lies below it.
func within(dir, p string) bool {
	if dir == "/" {
		return true
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}
