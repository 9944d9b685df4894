package confine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
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
// as a fake agent carry it without a line in their main. The variable
// counts only when it names the in-memory rule set Wrap made: a stray
// BHW_CONFINE_FD in a person's environment is dropped, and the program
// runs as itself.
func init() {
	if fd, ok := os.LookupEnv(trampolineEnv); ok {
		os.Unsetenv(trampolineEnv)
		if n, ok := RulesFD(fd); ok {
			trampoline(n)
		}
	}
}

// rulesName names the in-memory file that carries a rule set to the
// process that applies it.
const rulesName = "bhw-confine"

// RulesFile is an in-memory file holding r (nil: no confinement), for a
// child started through ExtraFiles to read with ReadRules. The caller
// closes it once the child has started.
func RulesFile(r *Rules) (*os.File, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	// An in-memory file, not the environment: one variable may hold only
	// 128 KiB, and a home of many entries makes a long rule set.
	f, err := memFile(rulesName)
	if err != nil {
		return nil, fmt.Errorf("confine: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, fmt.Errorf("confine: writing the rule set: %w", err)
	}
	return f, nil
}

// RulesFD reads text as the descriptor of a rule set RulesFile made and
// this process inherited: false for anything else (not a number, a
// descriptor not open, or open on another file).
func RulesFD(text string) (int, bool) {
	fd, err := strconv.Atoi(text)
	if err != nil || fd < 3 {
		return 0, false
	}
	target, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	return fd, err == nil && strings.HasPrefix(target, "/memfd:"+rulesName+" ")
}

// ReadRules reads and closes the rule set at descriptor fd (RulesFD):
// nil when the child is to run unconfined.
func ReadRules(fd int) (*Rules, error) {
	f := os.NewFile(uintptr(fd), rulesName)
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, 0, maxRules))
	if err != nil {
		return nil, fmt.Errorf("reading the rule set: %w", err)
	}
	var r *Rules
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("reading the rule set: %w", err)
	}
	return r, nil
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
	f, err := RulesFile(&r)
	if err != nil {
		return nil, err
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
func trampoline(fd int) {
	err := confineAndExec(fd)
	fmt.Fprintf(os.Stderr, "bhw-run: the agent was not started: the confinement failed: %v\n", err)
	os.Exit(ExitTrampoline)
}

func confineAndExec(fd int) error {
	r, err := ReadRules(fd)
	if err != nil {
		return err
	}
	if len(os.Args) == 0 || !strings.HasPrefix(os.Args[0], "/") {
		return errors.New("no program to start")
	}
	if r != nil {
		if err := Apply(*r); err != nil {
			return err
		}
	}
	CloseInherited()
	return syscall.Exec(os.Args[0], os.Args, os.Environ())
}

// CloseInherited marks every descriptor above 2 close-on-exec, so the
// program this process execs or starts next gets stdin, stdout and stderr
// only. A descriptor bhw-run inherited from whoever started it (a
// careless `7<~/.blobhub/credentials.yaml`) is open in every child Go
// starts, and Landlock does not judge files already open: the agent
// could read through it what the confinement refuses by path.
func CloseInherited() {
	closeInherited()
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
