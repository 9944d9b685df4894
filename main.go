// Command bhw-run runs one activation of one BlobHub thread and exits.
// This file is wiring only: flags, logging, the adapters, and the one place
// where an error becomes an exit code.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lmittmann/tint"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/blobhub/bhw-run/acp"
	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/claude"
	"github.com/blobhub/bhw-run/codex"
	"github.com/blobhub/bhw-run/run"
)

// version is stamped by `make build` (-ldflags "-X main.version=…", from
// git describe); a plain `go build` or `go install` leaves it empty and
// buildVersion reads the build's own record instead.
var version string

// buildVersion is this binary's version: the stamped one, else the module
// version `go install module@version` records, else the VCS revision `go
// build` records in a checkout ("dev-<revision>", "-dirty" with local
// changes), else "dev".
func buildVersion() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	rev, dirty := "", false
	for _, kv := range bi.Settings {
		switch kv.Key {
		case "vcs.revision":
			rev = kv.Value
		case "vcs.modified":
			dirty = kv.Value == "true"
		}
	}
	if rev == "" {
		return "dev"
	}
	v := "dev-" + rev[:min(12, len(rev))]
	if dirty {
		v += "-dirty"
	}
	return v
}

// adapters are the agents this build runs; the first is `thread new`'s
// default. Adding an agent is its folder plus one entry here.
var adapters = append([]agent.Adapter{claude.Adapter, codex.Adapter}, acp.Adapters()...)

func main() {
	// Not dumpable, first: a process of the same user (an agent's tool) can
	// then read neither /proc/<pid>/environ, where BLOBHUB_API_KEY is, nor
	// bhw-run's memory, nor ptrace it. The agents bhw-run starts are
	// dumpable again (execve resets it). Root's readers are not held back.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	// One P. bhw-run waits on its agent and on BlobHub nearly all the time,
	// and with a P per core every burst of work (an agent's line, a
	// request, its answer) is handed between threads that wake each other:
	// one P saves 12-17 % of a turn's CPU on two cores
	// (BenchmarkE2ECodexTurnOverhead, BenchmarkE2EClaudeTurnOverhead), and
	// nothing bhw-run does is parallel work. GOMAXPROCS in the environment
	// still wins.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	code := Main(os.Args, os.Stdout, os.Stderr)
	stopProfile()
	os.Exit(code)
}

// stopProfile ends the CPU profile of a build with the cpuprofile tag
// (cpuprofile.go); a no-op otherwise.
var stopProfile = func() {}

// Main runs the CLI and returns the exit code. Tests call it in-process.
func Main(args []string, stdout, stderr io.Writer) int {
	// Signals are caught before anything else runs: a run hands them to its
	// activation (which ends at once while it holds nothing, and saves its
	// state after), every other command ends on its context (withSignals).
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx := context.Background()
	run.Version = buildVersion()
	// Every byte bhw-run prints goes through the redaction of the keys it
	// reads: the summary, every command's output, the log records, the
	// error line. Resolve adds the keys as it reads them.
	secrets := run.NewSecrets(envKeys()...)
	out, errOut := secrets.Writer(stdout), secrets.Writer(stderr)
	defer errOut.Flush()
	defer out.Flush()
	cl := &cliState{stdout: out, stderr: errOut, secrets: secrets, stderrTTY: isTerminal(stderr), stdoutTTY: isTerminal(stdout), rawStderr: stderr, sigs: sigs}
	app := cl.app()
	line, err := parseArgs(app, args)
	cl.line = line
	// The logger of an error found before urfave/cli runs, which follows
	// --log-format as every record does; before() makes the command's own.
	g := line.globals
	on := func(name string) bool { v, _ := strconv.ParseBool(g[name]); return v }
	cl.log, _ = cl.newLogger(g["log-format"], on("verbose"), on("quiet"))
	if err != nil {
		return cl.exit(err)
	}
	argv := line.argv
	if last := len(line.path) - 1; last >= 0 {
		c := line.path[last]
		switch {
		case line.help:
			cl.printHelp(line.path)
			return run.ExitOK
		case len(c.Subcommands) > 0:
			// A command of commands with none of them.
			cl.printHelp(line.path)
			return cl.exit(run.UsageError("%s needs one of its commands: %s", fullName(line.path), strings.Join(commandNames(c.Subcommands), ", ")))
		}
	} else if line.help {
		argv = []string{args[0], "--help"} // urfave/cli prints the app's help
	}
	err = app.RunContext(ctx, argv)
	return cl.exit(err)
}

// cliState carries what the commands share.
type cliState struct {
	stdout, stderr io.Writer // redacting secrets
	secrets        *run.Secrets
	stderrTTY      bool      // the real stderr is a terminal
	stdoutTTY      bool      // the real stdout is a terminal
	rawStderr      io.Writer // the real stderr, for the terminal's width
	log            *slog.Logger
	summary        *run.Summary
	jsonOut        bool
	line           cmdline
	verbose        bool
	sigs           <-chan os.Signal // SIGINT/SIGTERM, caught from Main's first instruction
	// term is stderr at a terminal, which logs go through and a run draws
	// its status line on; nil when stderr is not a terminal, or with -q.
	term *terminal
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func globalFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "profile", EnvVars: []string{"BLOBHUB_PROFILE"}, Usage: "credentials profile"},
		&cli.StringFlag{Name: "api-url", EnvVars: []string{"BLOBHUB_API_URL"}, Usage: "https://…/v1, http:// for loopback, or file:///abs/dir (local store)"},
		&cli.StringFlag{Name: "api-key", EnvVars: []string{"BLOBHUB_API_KEY"}, Usage: "API key (prefer the env var or the credentials file)"},
		&cli.StringFlag{Name: "state-dir", EnvVars: []string{"BHW_STATE_DIR"}, Usage: "root of the state tree (default ~/.blobhub-worker/profiles/{profile})"},
		&cli.StringFlag{Name: "config", EnvVars: []string{"BHW_CONFIG"}, Usage: "config file (default {state-dir}/config.yaml)"},
		&cli.StringFlag{Name: "section", EnvVars: []string{"BHW_SECTION"}, Usage: "config section that owns the alias"},
		&cli.StringFlag{Name: "revision", EnvVars: []string{"BHW_REVISION_ID"}, Usage: "revision id of the session to use, over config.yaml's sections (with --session)"},
		&cli.StringFlag{Name: "session", EnvVars: []string{"BHW_SESSION_ID"}, Usage: "session id of the session to use, over config.yaml's sections (with --revision)"},
		&cli.DurationFlag{Name: "lock-wait", EnvVars: []string{"BHW_LOCK_WAIT"}, Usage: "wait this long for the thread lock (0: fail fast)"},
		&cli.DurationFlag{Name: "slot-wait", EnvVars: []string{"BHW_SLOT_WAIT"}, Usage: "wait this long for a free agent slot, in arrival order (0: fail fast)"},
		&cli.DurationFlag{Name: "max-duration", EnvVars: []string{"BHW_MAX_DURATION"}, Value: 60 * time.Minute, Usage: "wall-clock cap on one turn"},
		&cli.DurationFlag{Name: "stall-timeout", EnvVars: []string{"BHW_STALL_TIMEOUT"}, Value: 10 * time.Minute, Usage: "agent silent this long while nothing is open → stalled"},
		&cli.StringFlag{Name: "log-format", EnvVars: []string{"BHW_LOG_FORMAT"}, Value: "auto", Usage: "auto (tint on a TTY, JSON otherwise), text, json"},
		&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "more on stderr: debug records, and each item as it is posted"},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "less on stderr"},
		&cli.BoolFlag{Name: "json", Usage: "machine-readable stdout"},
		&cli.BoolFlag{Name: "version", Usage: "print the version"},
	}
}

func (cl *cliState) app() *cli.App {
	cli.HelpFlag = &cli.BoolFlag{Name: "help", Aliases: []string{"h"}, Usage: "show help"}
	app := &cli.App{
		Name:                   "bhw-run",
		Usage:                  "run one activation of one BlobHub thread and exit",
		UsageText:              "bhw-run [flags] <alias>\nbhw-run run [flags] <alias>\nbhw-run ls [--state S,...] [--runnable] [--print0] [--json]\nbhw-run thread new|edit|post|show|stop|retry …\nbhw-run policy explain …\nbhw-run doctor [--json]\nbhw-run completion bash|zsh|fish\nbhw-run version\nbhw-run <command> --help",
		ArgsUsage:              "<alias>",
		Version:                run.Version,
		HideVersion:            true,
		Flags:                  globalFlags(),
		Writer:                 cl.stdout,
		ErrWriter:              cl.stderr,
		CustomAppHelpTemplate:  cli.AppHelpTemplate + "\n" + examplesHelp("") + "\n" + run.ExitHelp(),
		UseShortOptionHandling: false,
		// Errors become exit codes once, in exit(): never inside Run, where
		// deferred unlocks and state writes would be skipped.
		ExitErrHandler: func(*cli.Context, error) {},
		Before:         cl.before,
		Action: func(c *cli.Context) error {
			if c.Bool("version") {
				return cl.version(c)
			}
			if c.NArg() == 0 {
				_ = cli.ShowAppHelp(c)
				return run.UsageError("missing <alias>")
			}
			return cl.runAlias(c)
		},
		Commands: []*cli.Command{
			{
				Name: "run", Usage: "one activation of <alias> (for an alias that equals a command name)", ArgsUsage: "<alias>",
				Description: "The same as bhw-run <alias>; after -- every word is the alias, even one named like a command.",
				Action:      cl.runAlias,
			},
			{
				Name: "ls", Usage: "list the section's job threads (alias<TAB>state), or the aliases a run would act on now, oldest waiting first", ArgsUsage: " ",
				Description: "Plain ls prints alias<TAB>state lines in alias order; --runnable prints bare aliases, one a line, for a pipeline.",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "state", Usage: "only these wire states, comma-separated: pending, active, completed, failed, none"},
					&cli.BoolFlag{Name: "runnable", Usage: "only threads a run would act on now whose lock is free, the oldest waiting person message first; bare aliases"},
					&cli.BoolFlag{Name: "print0", Usage: "print the aliases NUL-separated (for xargs -0)"},
					&cli.GenericFlag{Name: "wait", Value: &waitFlag{}, Usage: "with --runnable: wait until a thread is runnable (`--wait=MAX`: at most MAX, then print nothing), looking at the session's changes every discovery.poll_interval", DefaultText: "no bound"},
				},
				Action: cl.ls,
			},
			cl.threadCommand(),
			{
				Name: "policy", Usage: "check a thread's policy",
				Subcommands: []*cli.Command{{
					Name: "explain", Usage: "which rule decides a described call, and why (the gate's own code)", ArgsUsage: "<alias>",
					Description: "Reads the thread's envelope and this machine's config; writes nothing.",
					Flags: []cli.Flag{
						&cli.StringFlag{Name: "effect", Usage: "read, write, exec or network (default exec, or write with --path)"},
						&cli.StringFlag{Name: "command", Usage: "the command line (exec) or URL (network)"},
						&cli.StringFlag{Name: "path", Usage: "the path (read, write)"},
					},
					Action: cl.explain,
				}},
			},
			cl.doctorCommand(),
			cl.completionCommand(),
			cl.manCommand(),
			{Name: "version", Usage: "print the version", ArgsUsage: " ", Action: cl.version},
		},
	}
	app.Before, app.Action = coded(app.Before), coded(app.Action)
	app.OnUsageError = usageError("bhw-run")
	codedCommands(app.Commands, "bhw-run")
	for _, c := range app.Commands {
		if c.Name != "run" {
			cl.withSignals(c)
		}
	}
	return app
}

// usageError is a flag value urfave/cli cannot parse, as a usage error
// that points at the help of the command it was given to.
func usageError(name string) cli.OnUsageErrorFunc {
	return func(_ *cli.Context, err error, _ bool) error {
		return run.UsageError("%v; see %s --help", err, name)
	}
}

func commandNames(cmds []*cli.Command) []string {
	var out []string
	for _, c := range cmds {
		out = append(out, c.Name)
	}
	return out
}

// versionInfo is what `bhw-run version --json` prints.
type versionInfo struct {
	Version string `json:"version"`
	Go      string `json:"go"`
}

func (cl *cliState) version(c *cli.Context) error {
	if c.NArg() > 0 {
		return run.UsageError("version takes no arguments, got %q", c.Args().Slice())
	}
	return cl.result(fmt.Sprintf("bhw-run %s", run.Version), versionInfo{Version: run.Version, Go: runtime.Version()})
}

// result prints a command's result: the line for a person, or with --json
// v as one JSON object.
func (cl *cliState) result(line string, v any) error {
	if cl.jsonOut {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		line = string(run.ShownJSON(b))
	}
	_, err := fmt.Fprintln(cl.stdout, line)
	return err
}

// withSignals makes every command under c (all but a run, whose activation
// reads the signals itself) end on its context at a signal, with 130/143
// when that makes it fail.
func (cl *cliState) withSignals(c *cli.Command) {
	if fn := c.Action; fn != nil {
		c.Action = func(cc *cli.Context) error {
			ctx, _, stop := run.WatchSignals(cc.Context, cl.sigs)
			defer stop()
			cc.Context = ctx
			err := fn(cc)
			if sig := run.SignalOf(ctx); sig != nil && err != nil {
				return &run.ExitError{Exit: run.SignalExit(sig), Message: "interrupted by " + sig.String(), Err: err}
			}
			return err
		}
	}
	for _, sc := range c.Subcommands {
		cl.withSignals(sc)
	}
}

// coded makes every error of fn an *run.ExitError with its exit code
// (run.Exit: INTERNAL, 1, for one without a documented code), so that exit
// can tell our errors from urfave/cli's own.
func coded(fn func(*cli.Context) error) func(*cli.Context) error {
	if fn == nil {
		return nil
	}
	return func(c *cli.Context) error {
		if ee := run.Exit(fn(c)); ee != nil {
			return ee
		}
		return nil
	}
}

func codedCommands(cmds []*cli.Command, parent string) {
	for _, c := range cmds {
		name := parent + " " + c.Name
		c.Action = coded(c.Action)
		c.OnUsageError = usageError(name)
		// parseArgs reads the help word itself; urfave/cli's own would
		// take `bhw-run run -- help` for a request of help.
		c.HideHelpCommand = true
		codedCommands(c.Subcommands, name)
	}
}

func (cl *cliState) before(c *cli.Context) error {
	cl.jsonOut = c.Bool("json")
	cl.verbose = c.Bool("verbose")
	if !c.Bool("quiet") {
		cl.term = newTerminal(cl.stderr, cl.rawStderr, cl.verbose)
	}
	log, err := cl.newLogger(c.String("log-format"), c.Bool("verbose"), c.Bool("quiet"))
	cl.log = log
	return err
}

// newLogger is the logger of --log-format, -v and -q: tint on a terminal
// and JSON otherwise for auto. An unknown format is a usage error, with
// the auto logger to say so.
func (cl *cliState) newLogger(format string, verbose, quiet bool) (*slog.Logger, error) {
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	if quiet {
		level = slog.LevelError
	}
	// A run's status line is erased before each record and drawn again.
	var logw io.Writer = cl.stderr
	if cl.term != nil {
		logw = cl.term
	}
	var err error
	switch format {
	case "":
		format = os.Getenv("BHW_LOG_FORMAT")
	case "auto", "text", "json":
	default:
		err = run.UsageError("--log-format %q: use auto, text or json", format)
		format = "auto"
	}
	if format == "" || format == "auto" {
		format = "json"
		if cl.stderrTTY {
			format = "text"
		}
	}
	if format == "text" {
		// Colours only on a terminal: a log file gets plain text.
		return slog.New(tint.NewTextHandler(logw, &tint.Options{Level: level, TimeFormat: time.Kitchen, NoColor: !cl.stderrTTY, ReplaceAttr: escapeAttr})), err
	}
	return slog.New(slog.NewJSONHandler(jsonShownWriter{logw}, &slog.HandlerOptions{Level: level})), err
}

// jsonShownWriter passes the JSON handler's records, one Write each,
// through run.ShownJSON: a log file someone tails gets the same records with
// DEL, C1 and the bidirectional controls the wire text carried as \u
// escapes.
type jsonShownWriter struct{ w io.Writer }

func (j jsonShownWriter) Write(p []byte) (int, error) {
	if _, err := j.w.Write(run.ShownJSON(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// options are the global flags for run.Resolve, with where the section
// and the session came from (flag > env > config).
func (cl *cliState) options(c *cli.Context) run.Options {
	from := func(names ...string) string {
		for _, n := range names {
			if _, ok := cl.line.globals[n]; ok {
				return run.FromFlag
			}
		}
		return run.FromEnv
	}
	return run.Options{
		Profile: c.String("profile"), APIURL: c.String("api-url"), APIKey: c.String("api-key"),
		StateDir: c.String("state-dir"), ConfigPath: c.String("config"), Section: c.String("section"),
		RevisionID: c.String("revision"), SessionID: c.String("session"),
		SectionFrom: from("section"), SessionFrom: from("revision", "session"),
		Adapters: adapters, Secrets: cl.secrets,
	}
}

// client opens BlobHub (or the local store) for the resolved session.
func client(s *run.Setup, key, userID string) (blobhub.Client, error) {
	c, err := blobhub.New(blobhub.Config{APIURL: s.APIURL, APIKey: key,
		RevisionID: s.Section.Session.RevisionID, SessionID: s.Section.Session.SessionID, UserID: userID})
	if err != nil {
		return nil, run.Errorf(run.CodeInvalidConfig, "%v", err)
	}
	return c, nil
}

// open validates the command's <alias> (the first of nargs arguments),
// resolves the setup for it and opens BlobHub with the key the command
// posts with: the runner's, or with --as the person's.
func (cl *cliState) open(c *cli.Context, nargs int, person bool) (alias string, s *run.Setup, bh blobhub.Client, err error) {
	if c.NArg() != nargs {
		return "", nil, nil, run.UsageError("%s expects %d argument(s), got %d: %s; put flags before `--`", c.Command.FullName(), nargs, c.NArg(), c.Command.ArgsUsage)
	}
	alias = c.Args().First()
	if err := run.ValidateAlias(alias); err != nil {
		return "", nil, nil, run.Errorf(run.CodeBadAlias, "invalid alias %q: %v", alias, err)
	}
	if s, err = run.Resolve(cl.options(c), alias); err != nil {
		return "", nil, nil, err
	}
	key, userID := s.APIKey, "usr_local"
	if person {
		if key, err = run.PersonKey(s, c.String("as")); err != nil {
			return "", nil, nil, err
		}
		userID = "usr_person"
	}
	bh, err = client(s, key, userID)
	return alias, s, bh, err
}

func (cl *cliState) runAlias(c *cli.Context) error {
	alias, setup, bh, err := cl.open(c, 1, false)
	if w := c.Duration("slot-wait"); err == nil && w < 0 {
		// Bounded: a wait for ever would hold the thread lock for ever.
		err = run.UsageError("--slot-wait %v is negative; pass how long to wait for an agent slot, e.g. 30m (0: fail fast)", w)
	}
	if err != nil {
		// --json promises one summary object, also when no run started.
		ee := run.Exit(err)
		cl.summary = &run.Summary{Alias: c.Args().First(), ExitCode: ee.Exit, Error: &run.SummaryError{Code: ee.Code, Message: ee.Message}}
		return ee
	}
	r := &run.Runner{
		Setup: setup, Client: bh, Logger: cl.log,
		LockWait: c.Duration("lock-wait"), SlotWait: c.Duration("slot-wait"), MaxDuration: c.Duration("max-duration"), StallTimeout: c.Duration("stall-timeout"),
		OwnProcess: true, Signals: cl.sigs,
	}
	switch {
	case cl.term != nil:
		r.Observer = cl.term
		cl.term.Start(alias)
		defer cl.term.Stop()
	case cl.verbose:
		r.Observer = itemLog{cl.log}
	}
	sum, err := r.Run(c.Context, alias)
	cl.summary = sum
	return commandHint(err, sum, alias)
}

// commandHint adds to a run of a thread that does not exist the command
// its alias was likely meant to be (`bhw-run thred`).
func commandHint(err error, sum *run.Summary, alias string) error {
	var ee *run.ExitError
	if !errors.As(err, &ee) || ee.Code != run.CodeNoThread || strings.Contains(alias, "/") {
		return err
	}
	near := nearest(alias, commandNames((&cliState{}).app().Commands))
	if near == "" || near == alias {
		return err
	}
	hinted := &run.ExitError{Exit: ee.Exit, Code: ee.Code, Message: ee.Message + fmt.Sprintf("; or did you mean the command `bhw-run %s`?", near), Err: ee.Err}
	if sum != nil && sum.Error != nil {
		sum.Error.Message = hinted.Message
	}
	return hinted
}

// ls is discovery for schedulers: what a pass should run.
func (cl *cliState) ls(c *cli.Context) error {
	if c.NArg() != 0 {
		return run.UsageError("ls takes no arguments, got %q; pick the section with --section", c.Args().Slice())
	}
	var states []string
	for _, s := range strings.Split(c.String("state"), ",") {
		switch s = strings.TrimSpace(s); s {
		case "":
		case "pending", "active", "completed", "failed", run.StateNone:
			states = append(states, s)
		default:
			return run.UsageError("--state %q: use pending, active, completed, failed or none, comma-separated", s)
		}
	}
	if c.Bool("print0") && cl.jsonOut {
		return run.UsageError("--print0 and --json exclude each other; pick one")
	}
	setup, err := run.Resolve(cl.options(c), "")
	if err != nil {
		return err
	}
	bh, err := client(setup, setup.APIKey, "usr_local")
	if err != nil {
		return err
	}
	wait, _ := c.Generic("wait").(*waitFlag)
	if wait != nil && wait.on && (!c.Bool("runnable") || len(states) > 0) {
		return run.UsageError("--wait waits for a runnable thread: give it with --runnable, without --state")
	}
	r := &run.Runner{Setup: setup, Client: bh, Logger: cl.log}
	// The listing is printed before a pass that read the session's
	// changes moves its cursor past them (run/feed.go).
	o := run.ListOptions{States: states, Runnable: c.Bool("runnable"), Emit: func(list []run.Listing) error {
		return cl.printListing(c, list)
	}}
	if wait != nil && wait.on {
		_, err = r.WaitRunnable(c.Context, o, wait.max)
		return err
	}
	_, err = r.List(c.Context, o)
	return err
}

// printListing prints what ls found, in the form its flags ask for.
func (cl *cliState) printListing(c *cli.Context, list []run.Listing) error {
	w := bufio.NewWriter(cl.stdout)
	switch {
	case cl.jsonOut:
		b, _ := json.Marshal(list)
		fmt.Fprintln(w, string(run.ShownJSON(b)))
	case c.Bool("print0"):
		for _, l := range list {
			fmt.Fprintf(w, "%s\x00", l.Alias)
		}
	case c.Bool("runnable"):
		// Bare aliases, one a line: `ls --runnable | xargs -n1 bhw-run run --`.
		for _, l := range list {
			fmt.Fprintln(w, shown(l.Alias))
		}
	default:
		for _, l := range list {
			fmt.Fprintf(w, "%s\t%s\n", shown(l.Alias), shown(l.State))
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	// Through to the pipe: a pass moves its cursor only past what the
	// next command of the pipeline has been handed.
	if f, ok := cl.stdout.(interface{ Flush() error }); ok {
		return f.Flush()
	}
	return nil
}

func (cl *cliState) explain(c *cli.Context) error {
	alias, setup, bh, err := cl.open(c, 1, false)
	if err != nil {
		return err
	}
	r := &run.Runner{Setup: setup, Client: bh, Logger: cl.log}
	ex, err := r.Explain(c.Context, alias, c.String("effect"), c.String("command"), c.String("path"))
	if err != nil {
		return noThreadWhere(err, setup)
	}
	return cl.result(shownText(strings.TrimSuffix(ex.Text(), "\n")), ex)
}

// noThreadWhere adds to a thread not found where it was looked for.
func noThreadWhere(err error, s *run.Setup) error {
	var ee *run.ExitError
	if errors.As(err, &ee) && ee.Code == run.CodeNoThread {
		return &run.ExitError{Exit: ee.Exit, Code: ee.Code, Message: ee.Message + "; looked in " + s.Where(), Err: ee.Err}
	}
	return err
}

// envKeys are the values of every BLOBHUB_*KEY* variable: secrets
// whether or not a command uses them.
func envKeys() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "BLOBHUB_") && strings.Contains(k, "KEY") && v != "" {
			out = append(out, v)
		}
	}
	return out
}

// exit prints the outcome and maps the error to the exit code, once. The
// error is a log record like every other (--log-format); the summary of a
// run is stdout's one line, or its --json object.
func (cl *cliState) exit(err error) int {
	code := run.ExitOK
	var ee *run.ExitError
	switch {
	case cl.summary != nil:
		code = cl.summary.ExitCode
	case errors.As(err, &ee):
		code = ee.Exit
	case err != nil:
		// Every error of ours is an *ExitError by now (coded wraps the
		// actions), so this is urfave/cli's own: a usage error.
		code = run.ExitUsage
	}
	if err != nil {
		attrs := []any{"exit", code}
		msg := err.Error()
		if errors.As(err, &ee) {
			msg = ee.Message
			if ee.Code != "" {
				attrs = append([]any{"code", ee.Code}, attrs...)
			}
		}
		cl.log.Error(msg, attrs...)
	}
	if s := cl.summary; s != nil {
		if cl.jsonOut {
			b, _ := json.Marshal(s)
			fmt.Fprintln(cl.stdout, string(run.ShownJSON(b)))
		} else {
			fmt.Fprintln(cl.stdout, summaryLine(s))
		}
	}
	return code
}

// summaryLine is a run's outcome for a person: alias, outcome, exit, and
// the error's code and message, escaped for the terminal.
func summaryLine(s *run.Summary) string {
	outcome := s.Outcome
	if outcome == "" {
		outcome = "error"
	}
	line := fmt.Sprintf("%s: %s (exit %d)", shown(s.Alias), outcome, s.ExitCode)
	if e := s.Error; e != nil {
		switch {
		case e.Code != "" && e.Message != "":
			line += " " + e.Code + ": " + shown(e.Message)
		case e.Code != "":
			line += " " + e.Code
		case e.Message != "":
			line += " " + shown(e.Message)
		}
	}
	return line
}
