package confine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// trampolineEnv, in a process's environment, makes it the trampoline: its
// value is the descriptor the rule set is read from. Only Wrap sets it,
// for the one process between bhw-run's fork and the agent's exec; the
// agent never sees it. A process that sets it itself can only confine
// itself further: Landlock domains stack, none widens.
const trampolineEnv = "BHW_CONFINE_FD"

// maxRules bounds the rule set the trampoline reads.
const maxRules = 16 << 20

// The trampoline runs before anything else of the program: every binary
// that can start a confined agent imports this package through the
// process layer, so bhw-run and each test binary that re-executes itself
// as a fake agent carry it without a line in their main.
//
// Only a variable that names an in-memory file, as Wrap's does, makes the
// trampoline: a stray one left in the environment by someone else is
// dropped, and the program runs as itself.
func init() {
	if fd, ok := os.LookupEnv(trampolineEnv); ok {
		if isMemFile(fd) {
			trampoline(fd)
		}
		_ = os.Unsetenv(trampolineEnv)
	}
}

// Wrap makes cmd start through the trampoline: the program re-executes
// itself (/proc/self/exe, which still names it after an upgrade replaced
// the file), reads r from an in-memory file, confines itself and execs
// cmd's program with cmd's arguments and environment. cmd.Path must be
// absolute; Wrap must come before Start. The caller closes
// the returned file once cmd has started.
func Wrap(cmd *exec.Cmd, r Rules) (*os.File, error) {
	if !strings.HasPrefix(cmd.Path, "/") {
		return nil, fmt.Errorf("confine: %q is not an absolute path", cmd.Path)
	}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	// An in-memory file, not the environment: one variable may hold only
	// 128 KiB, and a home of many entries makes a long rule set.
	f, err := memFile("bhw-confine")
	if err != nil {
		return nil, fmt.Errorf("confine: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, fmt.Errorf("confine: writing the rule set: %w", err)
	}
	n := 3 + len(cmd.ExtraFiles)
	cmd.ExtraFiles = append(cmd.ExtraFiles, f)
	// Args[0] becomes the program the trampoline execs.
	args := append([]string{cmd.Path}, cmd.Args[1:]...)
	cmd.Path, cmd.Args = "/proc/self/exe", args
	cmd.Env = append(cmd.Env[:len(cmd.Env):len(cmd.Env)], fmt.Sprintf("%s=%d", trampolineEnv, n))
	return f, nil
}

// ExitTrampoline is the trampoline's exit status when it could not confine
// itself or exec the agent (what a shell uses for a command found but not
// run); its stderr says why.
const ExitTrampoline = 126

// trampoline confines this process and execs the agent; it never returns.
func trampoline(fdText string) {
	err := confineAndExec(fdText)
	fmt.Fprintf(os.Stderr, "bhw-run: the agent was not started: the confinement failed: %v\n", err)
	os.Exit(ExitTrampoline)
}

func confineAndExec(fdText string) error {
	var fd int
	if _, err := fmt.Sscanf(fdText, "%d", &fd); err != nil || fd < 3 {
		return fmt.Errorf("%s=%q is not a descriptor", trampolineEnv, fdText)
	}
	f := os.NewFile(uintptr(fd), "bhw-confine")
	b, err := io.ReadAll(io.NewSectionReader(f, 0, maxRules))
	f.Close()
	if err != nil {
		return fmt.Errorf("reading the rule set: %w", err)
	}
	var r Rules
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("reading the rule set: %w", err)
	}
	if len(os.Args) == 0 || !strings.HasPrefix(os.Args[0], "/") {
		return errors.New("no program to start")
	}
	if err := Apply(r); err != nil {
		return err
	}
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, trampolineEnv+"=") {
			env = append(env, kv)
		}
	}
	return syscall.Exec(os.Args[0], os.Args, env)
}

// handled is the file-system access Landlock refuses unless a rule
// grants it, for a kernel of ABI abi: reading, writing, making and
// removing files (ABI 1), moving them between folders (2), truncating
// them (3). Ioctls on devices and connecting to named sockets (5, 9) are
// left alone, as the network is unless ports are given.
func handled(abi int) landlock.AccessFSSet {
	set := landlock.AccessFSSet(1<<13 - 1) // ABI 1: execute … make_sym
	if abi >= 2 {
		set |= llsys.AccessFSRefer
	}
	if abi >= 3 {
		set |= llsys.AccessFSTruncate
	}
	return set
}

// Apply confines the calling process, and every process it starts from
// now on, to r: no_new_privs, then the Landlock rule set. It cannot be
// undone.
func Apply(r Rules) error {
	abi := ABI()
	if abi == 0 {
		return errors.New("this kernel has no Landlock")
	}
	cfg := landlock.Config{HandledAccessFS: handled(abi), Scoped: scoped(abi)}
	var ro, roFiles, rw, rwFiles []string
	for _, p := range r.Paths {
		switch {
		case p.Write && p.File:
			rwFiles = append(rwFiles, p.Path)
		case p.Write:
			rw = append(rw, p.Path)
		case p.File:
			roFiles = append(roFiles, p.Path)
		default:
			ro = append(ro, p.Path)
		}
	}
	rwDirs := landlock.RWDirs(rw...)
	if abi >= 2 {
		rwDirs = rwDirs.WithRefer()
	}
	// A path gone since the rule set was built grants nothing.
	rules := []landlock.Rule{landlock.RODirs(ro...).IgnoreIfMissing(), landlock.ROFiles(roFiles...).IgnoreIfMissing(),
		rwDirs.IgnoreIfMissing(), landlock.RWFiles(rwFiles...).IgnoreIfMissing()}
	if len(r.Ports) > 0 {
		if abi < NetABI {
			return fmt.Errorf("this kernel's Landlock (ABI %d) cannot restrict network connections", abi)
		}
		cfg.HandledAccessNet = llsys.AccessNetConnectTCP
		for _, port := range r.Ports {
			rules = append(rules, landlock.ConnectTCP(port))
		}
	}
	return cfg.Restrict(rules...)
}
