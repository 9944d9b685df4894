// Package cli is bhw-run's command line: the commands, their flags and
// help, what they print, and the one place where an error becomes an exit
// code. main passes in the version and the adapters; cli never reaches
// back. This file is the wiring: Main, the flags, logging.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lmittmann/tint"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/redact"
	"github.com/blobhub/bhw-run/run"
	"github.com/blobhub/bhw-run/setup"
)

// Main runs the command line and returns the exit code. version is the
// one stamped at build (empty: buildVersion reads the build's record);
// adapters are the agents this build runs, the first `thread new`'s
// default. Tests call it in-process.
func Main(args []string, stdout, stderr io.Writer, version string, adapters []agent.Adapter) int {
	// Signals are caught before anything else runs: a run hands them to its
	// activation (which ends at once while it holds nothing, and saves its
	// state after), every other command ends on its context (withSignals).
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	// A build with the cpuprofile tag ends its profile when the command
	// does (cpuprofile.go); a no-op otherwise.
	defer stopProfile()
	ctx := context.Background()
	// Every byte bhw-run prints goes through the redaction of the keys it
	// reads: the summary, every command's output, the log records, the
	// error line. Resolve adds the keys as it reads them.
	secrets := redact.NewSecrets(envKeys()...)
	out, errOut := secrets.Writer(stdout), secrets.Writer(stderr)
	defer errOut.Flush()
	defer out.Flush()
	cl := &cliState{release: buildVersion(version), stdout: out, stderr: errOut, secrets: secrets, stderrTTY: isTerminal(stderr), stdoutTTY: isTerminal(stdout), rawStderr: stderr, sigs: sigs, adapters: adapters}
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
			return exit.OK
		case len(c.Subcommands) > 0:
			// A command of commands with none of them.
			cl.printHelp(line.path)
			return cl.exit(exit.Usagef("%s needs one of its commands: %s", fullName(line.path), strings.Join(commandNames(c.Subcommands), ", ")))
		}
	} else if line.help {
		argv = []string{args[0], "--help"} // urfave/cli prints the app's help
	}
	err = app.RunContext(ctx, argv)
	return cl.exit(err)
}

// stopProfile ends the CPU profile of a build with the cpuprofile tag
// (cpuprofile.go); a no-op otherwise.
var stopProfile = func() {}

// cliState carries what the commands share.
type cliState struct {
	release        string    // this binary's version (buildVersion)
	stdout, stderr io.Writer // redacting secrets
	secrets        *redact.Secrets
	stderrTTY      bool      // the real stderr is a terminal
	stdoutTTY      bool      // the real stdout is a terminal
	rawStderr      io.Writer // the real stderr, for the terminal's width
	log            *slog.Logger
	summary        *run.Summary
	jsonOut        bool
	line           cmdline
	verbose        bool
	sigs           <-chan os.Signal // SIGINT/SIGTERM, caught from Main's first instruction
	adapters       []agent.Adapter  // the agents this build runs, the first the default
	// term is stderr at a terminal, which logs go through and a run draws
	// its status line on; nil when stderr is not a terminal, or with -q.
	term *terminal
	// human: stderr is a terminal and --log-format auto. An error is then
	// one line for a person, not a record, and none at all when the
	// command's outcome line on stdout (a terminal too) already says it.
	human bool
	// outcomeShown: the command printed its outcome line (doctor's).
	outcomeShown bool
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
		UsageText:              "bhw-run [flags] <alias>\nbhw-run run [flags] <alias>\nbhw-run ls [--state S,...] [--runnable] [--print0] [--json]\nbhw-run thread new|edit|post|show|stop|retry …\nbhw-run policy explain …\nbhw-run doctor [--json]\nbhw-run login [--profile P] [--api-key-stdin | --api-key-env VAR]\nbhw-run whoami | profile ls\nbhw-run completion bash|zsh|fish\nbhw-run version\nbhw-run <command> --help",
		ArgsUsage:              "<alias>",
		Version:                cl.release,
		HideVersion:            true,
		Flags:                  globalFlags(),
		Writer:                 cl.stdout,
		ErrWriter:              cl.stderr,
		CustomAppHelpTemplate:  cli.AppHelpTemplate + "\n" + examplesHelp("") + "\n" + exit.Help(),
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
				// The error first and short: the whole help would bury it.
				return exit.Usagef("missing <alias>: name the thread to run, as in `bhw-run demo/t1`; `bhw-run ls` lists the section's threads, `bhw-run --help` every command")
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
			cl.loginCommand(), cl.whoamiCommand(), cl.profileCommand(),
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
		return exit.Usagef("%v; see %s --help", err, name)
	}
}

func commandNames(cmds []*cli.Command) []string {
	var out []string
	for _, c := range cmds {
		out = append(out, c.Name)
	}
	return out
}

// result prints a command's result: the line for a person, or with --json
// v as one JSON object.
func (cl *cliState) result(line string, v any) error {
	if cl.jsonOut {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		line = string(redact.ShownJSON(b))
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
			ctx, _, stop := exit.WatchSignals(cc.Context, cl.sigs)
			defer stop()
			cc.Context = ctx
			err := fn(cc)
			sig := exit.SignalOf(ctx)
			switch {
			case sig != nil && err != nil:
				return &exit.Error{Exit: exit.OfSignal(sig), Code: exit.CodeInterrupted, Message: "interrupted by " + exit.SignalName(sig), Err: err}
			case sig != nil:
				// A command that ends at a signal (thread show --follow)
				// was stopped, not done: its exit says so, and at a
				// terminal the shell's prompt is all that follows.
				cl.outcomeShown = true
				return &exit.Error{Exit: exit.OfSignal(sig), Code: exit.CodeInterrupted, Message: "stopped by " + exit.SignalName(sig)}
			}
			return err
		}
	}
	for _, sc := range c.Subcommands {
		cl.withSignals(sc)
	}
}

// coded makes every error of fn an *exit.Error with its exit code
// (exit.Of: INTERNAL, 1, for one without a documented code), so that exit
// can tell our errors from urfave/cli's own.
func coded(fn func(*cli.Context) error) func(*cli.Context) error {
	if fn == nil {
		return nil
	}
	return func(c *cli.Context) error {
		if ee := exit.Of(fn(c)); ee != nil {
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
		err = exit.Usagef("--log-format %q: use auto, text or json", format)
		format = "auto"
	}
	if format == "" || format == "auto" {
		format = "json"
		if cl.stderrTTY {
			format = "text"
			cl.human = true
		}
	}
	if format == "text" {
		// Colours only on a terminal: a log file gets plain text.
		return slog.New(tint.NewTextHandler(logw, &tint.Options{Level: level, TimeFormat: time.TimeOnly, NoColor: !cl.stderrTTY, ReplaceAttr: escapeAttr})), err
	}
	return slog.New(slog.NewJSONHandler(jsonShownWriter{logw}, &slog.HandlerOptions{Level: level})), err
}

// jsonShownWriter passes the JSON handler's records, one Write each,
// through redact.ShownJSON: a log file someone tails gets the same records with
// DEL, C1 and the bidirectional controls the wire text carried as \u
// escapes.
type jsonShownWriter struct{ w io.Writer }

func (j jsonShownWriter) Write(p []byte) (int, error) {
	if _, err := j.w.Write(redact.ShownJSON(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// options are the global flags for setup.Resolve, with where the section
// and the session came from (flag > env > config).
func (cl *cliState) options(c *cli.Context) setup.Options {
	from := func(names ...string) string {
		for _, n := range names {
			if _, ok := cl.line.globals[n]; ok {
				return setup.FromFlag
			}
		}
		return setup.FromEnv
	}
	return setup.Options{
		Profile: c.String("profile"), APIURL: c.String("api-url"), APIKey: c.String("api-key"),
		StateDir: c.String("state-dir"), ConfigPath: c.String("config"), Section: c.String("section"),
		RevisionID: c.String("revision"), SessionID: c.String("session"),
		SectionFrom: from("section"), SessionFrom: from("revision", "session"),
		Adapters: cl.adapters, Version: cl.release, Secrets: cl.secrets,
	}
}

// client opens BlobHub (or the local store) for the resolved session. Its
// retries are debug records (-v) and, at a terminal, the status line.
func (cl *cliState) client(s *setup.Setup, key, userID string) (blobhub.Client, error) {
	cfg := blobhub.Config{APIURL: s.APIURL, APIKey: key,
		RevisionID: s.Section.Session.RevisionID, SessionID: s.Section.Session.SessionID, UserID: userID, Logger: cl.log}
	if cl.term != nil {
		cfg.OnRetry = cl.term.Retrying
	}
	// revision_id default and a session alias become ids first: the data
	// commands take only ids.
	if err := s.ResolveSession(context.Background(), cfg); err != nil {
		return nil, err
	}
	cfg.RevisionID, cfg.SessionID = s.Section.Session.RevisionID, s.Section.Session.SessionID
	c, err := blobhub.New(cfg)
	if err != nil {
		return nil, exit.Errorf(exit.CodeInvalidConfig, "%v", err)
	}
	return c, nil
}

// open validates the command's <alias> (the first of nargs arguments),
// resolves the setup for it and opens BlobHub with the key the command
// posts with: the runner's, or with --as the person's.
func (cl *cliState) open(c *cli.Context, nargs int, person bool) (alias string, s *setup.Setup, bh blobhub.Client, err error) {
	if c.NArg() != nargs {
		return "", nil, nil, argCountError(c, nargs)
	}
	alias = c.Args().First()
	if err := setup.ValidateAlias(alias); err != nil {
		return "", nil, nil, exit.Errorf(exit.CodeBadAlias, "invalid alias %q: %v", alias, err)
	}
	if s, err = setup.Resolve(cl.options(c), alias); err != nil {
		return "", nil, nil, err
	}
	key, userID := s.APIKey, "usr_local"
	if person {
		if key, err = setup.PersonKey(s, c.String("as")); err != nil {
			return "", nil, nil, err
		}
		userID = "usr_person"
	}
	bh, err = cl.client(s, key, userID)
	return alias, s, bh, err
}

// noThreadWhere adds to a thread not found where it was looked for.
func noThreadWhere(err error, s *setup.Setup) error {
	var ee *exit.Error
	if errors.As(err, &ee) && ee.Code == exit.CodeNoThread {
		return &exit.Error{Exit: ee.Exit, Code: ee.Code, Message: ee.Message + "; looked in " + s.Where(), Err: ee.Err}
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
	code := exit.OK
	var ee *exit.Error
	switch {
	case cl.summary != nil:
		code = cl.summary.ExitCode
	case errors.As(err, &ee):
		code = ee.Exit
	case err != nil:
		// Every error of ours is an *exit.Error by now (coded wraps the
		// actions), so this is urfave/cli's own: a usage error.
		code = exit.Usage
	}
	if err != nil {
		attrs := []any{"exit", code}
		msg, errCode := err.Error(), ""
		if errors.As(err, &ee) {
			msg, errCode = ee.Message, ee.Code
			if ee.Code != "" {
				attrs = append([]any{"code", ee.Code}, attrs...)
			}
		}
		switch {
		case cl.human && cl.stdoutTTY && (cl.summary != nil || cl.outcomeShown):
			// The outcome line below (or doctor's above) says it.
		case cl.human:
			line := "bhw-run: " + redact.Shown(msg)
			if errCode != "" {
				line += " (" + errCode + ")"
			}
			fmt.Fprintln(cl.stderr, line)
		default:
			cl.log.Error(msg, attrs...)
		}
	}
	if s := cl.summary; s != nil {
		if cl.jsonOut {
			b, _ := json.Marshal(s)
			fmt.Fprintln(cl.stdout, string(redact.ShownJSON(b)))
		} else {
			fmt.Fprintln(cl.stdout, summaryLine(s))
			if s.Outcome == run.OutcomeParked && cl.human && cl.stdoutTTY {
				fmt.Fprintln(cl.stdout, parkedHint(s.Alias))
			}
			if s.ThreadState == envelope.StateFailed {
				fmt.Fprintln(cl.stdout, failedHint(s.Alias))
			}
		}
	}
	return code
}
