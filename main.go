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
	"strings"
	"syscall"
	"time"

	"github.com/lmittmann/tint"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/claude"
	"github.com/blobhub/bhw-run/codex"
	"github.com/blobhub/bhw-run/run"
)

var version = "dev"

// adapters are the agents this build runs; the first is `thread new`'s
// default. Adding an agent is its folder plus one entry here.
var adapters = []agent.Adapter{claude.Adapter, codex.Adapter}

func main() {
	// Not dumpable, first: a process of the same user (an agent's tool) can
	// then read neither /proc/<pid>/environ, where BLOBHUB_API_KEY is, nor
	// bhw-run's memory, nor ptrace it. The agents bhw-run starts are
	// dumpable again (execve resets it). Root's readers are not held back.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	code := Main(os.Args, os.Stdout, os.Stderr)
	stopProfile()
	os.Exit(code)
}

// stopProfile ends the CPU profile of a build with the cpuprofile tag
// (cpuprofile.go); a no-op otherwise.
var stopProfile = func() {}

// Main runs the CLI and returns the exit code. Tests call it in-process.
func Main(args []string, stdout, stderr io.Writer) int {
	ctx := context.Background()
	// Every byte bhw-run prints goes through the redaction of the keys it
	// reads: the summary, every command's output, the log records, the
	// error line. Resolve adds the keys as it reads them.
	secrets := run.NewSecrets(envKeys()...)
	out, errOut := secrets.Writer(stdout), secrets.Writer(stderr)
	defer errOut.Flush()
	defer out.Flush()
	cl := &cliState{stdout: out, stderr: errOut, secrets: secrets, stderrTTY: isTerminal(stderr)}
	app := cl.app()
	argv, err := reorderArgs(app, args)
	if err != nil {
		fmt.Fprintf(cl.stderr, "bhw-run: %s\n", shownText(err.Error()))
		return run.ExitUsage
	}
	err = app.RunContext(ctx, argv)
	return cl.exit(err)
}

// cliState carries what the commands share.
type cliState struct {
	stdout, stderr io.Writer // redacting secrets
	secrets        *run.Secrets
	stderrTTY      bool // the real stderr is a terminal
	log            *slog.Logger
	summary        *run.Summary
	jsonOut        bool
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
		&cli.StringFlag{Name: "revision", EnvVars: []string{"BHW_REVISION_ID"}, Usage: "revision id, without a config file"},
		&cli.StringFlag{Name: "session", EnvVars: []string{"BHW_SESSION_ID"}, Usage: "session id, without a config file"},
		&cli.DurationFlag{Name: "lock-wait", EnvVars: []string{"BHW_LOCK_WAIT"}, Usage: "wait this long for the thread lock (0: fail fast)"},
		&cli.DurationFlag{Name: "slot-wait", EnvVars: []string{"BHW_SLOT_WAIT"}, Usage: "wait this long for a free agent slot, in arrival order (0: fail fast)"},
		&cli.DurationFlag{Name: "max-duration", EnvVars: []string{"BHW_MAX_DURATION"}, Value: 60 * time.Minute, Usage: "wall-clock cap on one turn"},
		&cli.DurationFlag{Name: "stall-timeout", EnvVars: []string{"BHW_STALL_TIMEOUT"}, Value: 10 * time.Minute, Usage: "agent silent this long while nothing is open → stalled"},
		&cli.StringFlag{Name: "log-format", EnvVars: []string{"BHW_LOG_FORMAT"}, Value: "auto", Usage: "auto (tint on a TTY, JSON otherwise), text, json"},
		&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "more on stderr"},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "less on stderr"},
		&cli.BoolFlag{Name: "json", Usage: "machine-readable stdout"},
	}
}

func (cl *cliState) app() *cli.App {
	cli.HelpFlag = &cli.BoolFlag{Name: "help", Aliases: []string{"h"}, Usage: "show help"}
	app := &cli.App{
		Name:                   "bhw-run",
		Usage:                  "run one activation of one BlobHub thread and exit",
		UsageText:              "bhw-run [flags] <alias>\nbhw-run run [flags] <alias>\nbhw-run ls [--state S,...] [--runnable] [--print0] [--json]\nbhw-run thread new|post|show|stop|retry …\nbhw-run version",
		ArgsUsage:              "<alias>",
		Version:                version,
		HideVersion:            true,
		Flags:                  globalFlags(),
		Writer:                 cl.stdout,
		ErrWriter:              cl.stderr,
		CustomAppHelpTemplate:  cli.AppHelpTemplate + "\n" + run.ExitHelp(),
		UseShortOptionHandling: false,
		// Errors become exit codes once, in exit(): never inside Run, where
		// deferred unlocks and state writes would be skipped.
		ExitErrHandler: func(*cli.Context, error) {},
		Before:         cl.before,
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				_ = cli.ShowAppHelp(c)
				return run.UsageError("missing <alias>")
			}
			return cl.runAlias(c)
		},
		Commands: []*cli.Command{
			{Name: "run", Usage: "one activation of <alias> (for an alias that equals a command name)", ArgsUsage: "<alias>", Action: cl.runAlias},
			{
				Name: "ls", Usage: "list the section's job threads (alias<TAB>state), or those a run would act on now, oldest waiting first", ArgsUsage: " ",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "state", Usage: "only these wire states, comma-separated: pending, active, completed, failed, none"},
					&cli.BoolFlag{Name: "runnable", Usage: "only threads a run would act on now whose lock is free, the oldest waiting person message first"},
					&cli.BoolFlag{Name: "print0", Usage: "print the aliases NUL-separated (for xargs -0)"},
				},
				Action: cl.ls,
			},
			cl.threadCommand(),
			{
				Name: "policy", Usage: "check a thread's policy",
				Subcommands: []*cli.Command{{
					Name: "explain", Usage: "which rule decides a described call, and why (the gate's own code)", ArgsUsage: "<alias>",
					Flags: []cli.Flag{
						&cli.StringFlag{Name: "effect", Usage: "read, write, exec or network (default exec, or write with --path)"},
						&cli.StringFlag{Name: "command", Usage: "the command line (exec) or URL (network)"},
						&cli.StringFlag{Name: "path", Usage: "the path (read, write)"},
					},
					Action: cl.explain,
				}},
			},
			{Name: "version", Usage: "print the version", Action: func(c *cli.Context) error {
				fmt.Fprintf(cl.stdout, "bhw-run %s\n", version)
				return nil
			}},
		},
	}
	app.Before, app.Action = coded(app.Before), coded(app.Action)
	codedCommands(app.Commands)
	return app
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

func codedCommands(cmds []*cli.Command) {
	for _, c := range cmds {
		c.Action = coded(c.Action)
		codedCommands(c.Subcommands)
	}
}

func (cl *cliState) before(c *cli.Context) error {
	cl.jsonOut = c.Bool("json")
	level := slog.LevelInfo
	if c.Bool("verbose") {
		level = slog.LevelDebug
	}
	if c.Bool("quiet") {
		level = slog.LevelError
	}
	format := c.String("log-format")
	if format == "auto" {
		format = "json"
		if cl.stderrTTY {
			format = "text"
		}
	}
	switch format {
	case "text":
		cl.log = slog.New(tint.NewTextHandler(cl.stderr, &tint.Options{Level: level, TimeFormat: time.Kitchen, ReplaceAttr: escapeAttr}))
	case "json":
		cl.log = slog.New(slog.NewJSONHandler(cl.stderr, &slog.HandlerOptions{Level: level}))
	default:
		return run.UsageError("--log-format %q: use auto, text or json", format)
	}
	return nil
}

func (cl *cliState) options(c *cli.Context) run.Options {
	return run.Options{
		Profile: c.String("profile"), APIURL: c.String("api-url"), APIKey: c.String("api-key"),
		StateDir: c.String("state-dir"), ConfigPath: c.String("config"), Section: c.String("section"),
		RevisionID: c.String("revision"), SessionID: c.String("session"),
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
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	r := &run.Runner{
		Setup: setup, Client: bh, Logger: cl.log,
		LockWait: c.Duration("lock-wait"), SlotWait: c.Duration("slot-wait"), MaxDuration: c.Duration("max-duration"), StallTimeout: c.Duration("stall-timeout"),
		OwnProcess: true, Signals: sigs,
	}
	sum, err := r.Run(c.Context, alias)
	cl.summary = sum
	return err
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
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	r := &run.Runner{Setup: setup, Client: bh, Logger: cl.log}
	list, err := r.List(ctx, run.ListOptions{States: states, Runnable: c.Bool("runnable")})
	if err != nil {
		return err
	}
	w := bufio.NewWriter(cl.stdout)
	switch {
	case cl.jsonOut:
		b, _ := json.Marshal(list)
		fmt.Fprintln(w, string(jsonShown(b)))
	case c.Bool("print0"):
		for _, l := range list {
			fmt.Fprintf(w, "%s\x00", l.Alias)
		}
	default:
		for _, l := range list {
			fmt.Fprintf(w, "%s\t%s\n", shown(l.Alias), shown(l.State))
		}
	}
	return w.Flush()
}

func (cl *cliState) explain(c *cli.Context) error {
	alias, setup, bh, err := cl.open(c, 1, false)
	if err != nil {
		return err
	}
	r := &run.Runner{Setup: setup, Client: bh, Logger: cl.log}
	out, err := r.Explain(c.Context, alias, c.String("effect"), c.String("command"), c.String("path"))
	if err != nil {
		return err
	}
	fmt.Fprint(cl.stdout, shownText(out))
	return nil
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

// exit prints the outcome and maps the error to the exit code, once.
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
		// actions), so this is urfave/cli's own: a flag value it cannot
		// parse is a usage error.
		code = run.ExitUsage
	}
	if err != nil {
		// A message may quote the wire (an envelope field, a server's text).
		fmt.Fprintf(cl.stderr, "bhw-run: %s\n", shownText(err.Error()))
	}
	if s := cl.summary; s != nil {
		if cl.jsonOut {
			b, _ := json.Marshal(s)
			fmt.Fprintln(cl.stdout, string(jsonShown(b)))
		} else {
			outcome := s.Outcome
			if outcome == "" {
				outcome = "error"
			}
			line := fmt.Sprintf("%s: %s (exit %d)", shown(s.Alias), outcome, s.ExitCode)
			if s.Error != nil && s.Error.Code != "" {
				line += " " + shown(s.Error.Code)
			}
			fmt.Fprintln(cl.stdout, line)
		}
	}
	return code
}
