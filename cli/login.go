package cli

// login, whoami and profile ls: blobhub-worker's own words for the shared
// credentials file (~/.blobhub/credentials.yaml), with its meaning and its
// flags, so a worker user's habits work here and the file either writes
// the other reads (docs/configuration.md, Credentials).

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/redact"
	"github.com/blobhub/bhw-run/setup"
)

// maxPiped is the most `--*-stdin` reads: a key or a URL, never a file.
const maxPiped = 64 << 10

func (cl *cliState) loginCommand() *cli.Command {
	src := func(name, what string) []cli.Flag {
		return []cli.Flag{
			&cli.BoolFlag{Name: name + "-stdin", Usage: "read the " + what + " from stdin"},
			&cli.StringFlag{Name: name + "-env", Usage: "read the " + what + " from the environment variable `VAR`"},
		}
	}
	flags := append(src("api-key", "API key"), src("api-url", "API URL")...)
	flags = append(flags, &cli.StringFlag{Name: "realtime-url", Usage: "the WebSocket API URL to store with the profile (bhw-run does not use it; blobhub-worker may)"})
	flags = append(flags, src("realtime-url", "realtime URL")...)
	flags = append(flags,
		&cli.BoolFlag{Name: "no-input", Usage: "never prompt; fail when the key is not given"},
		&cli.BoolFlag{Name: "force", Usage: "replace the user recorded in the profile's identity.yaml when the key is another user's"},
	)
	return &cli.Command{
		Name: "login", Usage: "store an API key as a profile of ~/.blobhub/credentials.yaml (blobhub-worker's file and flags)", ArgsUsage: " ",
		Description: "The same file and the same shape as blobhub-worker login and the BlobHub CLI's: --profile names the profile\n" +
			"(default BLOBHUB_PROFILE, else \"default\"); the first profile of the file becomes its default. The key comes from\n" +
			"--api-key, --api-key-stdin or --api-key-env VAR (one of them), else a prompt at a terminal; the URL likewise, else\n" +
			setup.DefaultAPIURL + ". The profile's state tree records the key's user in identity.yaml; a key of another user\n" +
			"is refused unless --force. The file is written with mode 0600.",
		Flags:  flags,
		Action: cl.login,
	}
}

func (cl *cliState) whoamiCommand() *cli.Command {
	return &cli.Command{
		Name: "whoami", Usage: "the profile, URL, BlobHub user and state tree a run would use", ArgsUsage: " ",
		Description: "Resolves the key as a run does (--api-key, BLOBHUB_API_KEY, --profile, the file's default) and asks BlobHub\n" +
			"whose it is. Writes nothing.",
		Action: cl.whoami,
	}
}

func (cl *cliState) profileCommand() *cli.Command {
	return &cli.Command{
		Name: "profile", Usage: "list the stored profiles (profile ls)",
		Subcommands: []*cli.Command{{
			Name: "ls", Usage: "list the stored profiles: the default marked *, the URL, and whether the profile has a state tree here", ArgsUsage: " ",
			Description: "Reads only the credentials file and the state trees; asks nothing of BlobHub.",
			Action:      cl.profileLs,
		}},
	}
}

// loginSource is one value of login: at most one of the flag, --NAME-stdin
// and --NAME-env; "" when none was given.
func (cl *cliState) loginSource(c *cli.Context, name string, literal *string, stdin io.Reader) (string, error) {
	var given []string
	if literal != nil {
		given = append(given, "--"+name)
	}
	if c.Bool(name + "-stdin") {
		given = append(given, "--"+name+"-stdin")
	}
	if c.IsSet(name + "-env") {
		given = append(given, "--"+name+"-env")
	}
	if len(given) > 1 {
		return "", exit.Usagef("%s both name a source for the %s; use one", strings.Join(given, " and "), name)
	}
	var v, from string
	switch {
	case literal != nil:
		v, from = *literal, "--"+name
	case c.Bool(name + "-stdin"):
		b, err := io.ReadAll(io.LimitReader(stdin, maxPiped))
		if err != nil {
			return "", exit.Usagef("--%s-stdin: cannot read stdin: %v", name, err)
		}
		v, from = string(b), "--"+name+"-stdin"
	case c.IsSet(name + "-env"):
		env := c.String(name + "-env")
		v, from = os.Getenv(env), "--"+name+"-env"
		if strings.TrimSpace(v) == "" {
			return "", exit.Usagef("--%s-env names %s, which is unset or empty; export it, or give the %s another way", name, env, name)
		}
	default:
		return "", nil
	}
	v = strings.TrimSpace(v)
	if v == "" {
		return "", exit.Usagef("%s gave an empty %s", from, name)
	}
	cl.secrets.Add(v)
	return v, nil
}

// stdin is where login reads a piped value or a prompt's answer; tests
// set it.
var stdin io.Reader = os.Stdin

func (cl *cliState) login(c *cli.Context) error {
	if c.NArg() != 0 {
		return exit.Usagef("login takes no arguments, got %q; the key goes in --api-key-stdin or --api-key-env", c.Args().Slice())
	}
	name := c.String("profile") // --profile, else BLOBHUB_PROFILE
	if name == "" {
		name = "default"
	}
	if err := setup.ValidateProfileName(name); err != nil {
		return err
	}
	piped := 0
	for _, n := range []string{"api-key", "api-url", "realtime-url"} {
		if c.Bool(n + "-stdin") {
			piped++
		}
	}
	if piped > 1 {
		return exit.Usagef("only one value can come from stdin; give the others by flag or --*-env")
	}
	// Only what the command line gives counts: BLOBHUB_API_KEY and
	// BLOBHUB_API_URL are a run's sources, not something to store.
	given := func(n string) *string {
		if v, ok := cl.line.globals[n]; ok {
			return &v
		}
		return nil
	}
	key, err := cl.loginSource(c, "api-key", given("api-key"), stdin)
	if err != nil {
		return err
	}
	apiURL, err := cl.loginSource(c, "api-url", given("api-url"), stdin)
	if err != nil {
		return err
	}
	var rtFlag *string
	if c.IsSet("realtime-url") {
		v := c.String("realtime-url")
		rtFlag = &v
	}
	realtimeURL, err := cl.loginSource(c, "realtime-url", rtFlag, stdin)
	if err != nil {
		return err
	}
	f, isFile := stdin.(*os.File)
	interactive := !c.Bool("no-input") && piped == 0 && isFile && term.IsTerminal(int(f.Fd()))
	if apiURL == "" {
		apiURL = setup.DefaultAPIURL
		if interactive {
			fmt.Fprintf(cl.stderr, "API URL [%s]: ", setup.DefaultAPIURL)
			line, _ := bufio.NewReader(io.LimitReader(stdin, maxPiped)).ReadString('\n')
			if v := strings.TrimSpace(line); v != "" {
				apiURL = v
			}
		}
	}
	if key == "" {
		if !interactive {
			return exit.Usagef("an API key is needed: pass --api-key-stdin (printf %%s \"$KEY\" | bhw-run login --api-key-stdin) or --api-key-env VAR")
		}
		fmt.Fprint(cl.stderr, "API key: ")
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(cl.stderr)
		if err != nil {
			return exit.Usagef("cannot read the API key: %v", err)
		}
		if key = strings.TrimSpace(string(b)); key == "" {
			return exit.Usagef("no API key given; run bhw-run login again and paste the key")
		}
		cl.secrets.Add(key)
	}
	apiURL = strings.TrimRight(apiURL, "/")

	// The key is checked before anything is written: a refused key leaves
	// the file as it was and makes no state tree.
	home, err := os.UserHomeDir()
	if err != nil {
		return exit.Errorf(exit.CodeInvalidConfig, "cannot find the home folder: %v; set HOME", err)
	}
	bh, err := blobhub.New(blobhub.Config{APIURL: apiURL, APIKey: key, Logger: cl.log, RetryBudget: loginRetryBudget})
	if err != nil {
		return exit.Errorf(exit.CodeInvalidConfig, "%v", err)
	}
	if _, err := bh.Me(c.Context); err != nil {
		return blobhub.AsExit(err, "users/me")
	}
	s := &setup.Setup{Profile: name, Home: home, Secrets: cl.secrets}
	if err := s.ResolveStateDir(cl.options(c), nil); err != nil {
		return err
	}
	if err := s.EnsureDir(s.StateDir); err != nil {
		return err
	}
	id, err := setup.CheckIdentity(c.Context, bh, s.StateDir)
	if codeOf(err) == exit.CodeUserIdentityMismatch && c.Bool("force") {
		// --force: the user of this key replaces the recorded one.
		if rmErr := setup.ForgetIdentity(s.StateDir); rmErr != nil {
			return rmErr
		}
		id, err = setup.CheckIdentity(c.Context, bh, s.StateDir)
	}
	if codeOf(err) == exit.CodeUserIdentityMismatch {
		return exit.Errorf(exit.CodeUserIdentityMismatch, "%v; or run bhw-run login --force to record the new user", err)
	}
	if err != nil {
		return err
	}
	path, err := setup.SaveProfile(home, name, key, apiURL, realtimeURL, cl.secrets)
	if err != nil {
		return err
	}
	cl.log.Debug("login", "profile", name, "credentials", path, "state_dir", s.StateDir)
	return cl.result(fmt.Sprintf("Logged in as %s, profile %q (%s, in %s)", userLabel(id.Name, id.UserID), name, setup.ShownURL(apiURL), path),
		map[string]any{"profile": name, "url": setup.ShownURL(apiURL), "realtime_url": realtimeURL, "credentials": path,
			"user": map[string]string{"user_id": id.UserID, "name": id.Name, "email": id.Email}, "state_directory": s.StateDir})
}

// loginRetryBudget bounds login's and whoami's question to BlobHub: a
// person waits at the terminal, so an unreachable BlobHub is said soon.
const loginRetryBudget = 15 * time.Second

func userLabel(name, id string) string {
	if name == "" {
		return id
	}
	return fmt.Sprintf("%s (%s)", name, id)
}

func (cl *cliState) whoami(c *cli.Context) error {
	if c.NArg() != 0 {
		return exit.Usagef("whoami takes no arguments, got %q", c.Args().Slice())
	}
	o := cl.options(c)
	s, err := setup.New(o)
	if err != nil {
		return err
	}
	u, err := s.ResolveAPI(o)
	if err != nil {
		return err
	}
	if err := s.ResolveStateDir(o, u); err != nil {
		return err
	}
	bh, err := blobhub.New(blobhub.Config{APIURL: s.APIURL, APIKey: s.APIKey, Logger: cl.log, RetryBudget: loginRetryBudget})
	if err != nil {
		return exit.Errorf(exit.CodeInvalidConfig, "%v", err)
	}
	ctx, cancel := context.WithCancel(c.Context)
	defer cancel()
	user, err := bh.Me(ctx)
	if err != nil {
		return blobhub.AsExit(err, "users/me")
	}
	label := s.Profile
	switch {
	case o.APIKey != "":
		label = "key from --api-key or BLOBHUB_API_KEY"
	case label == "":
		label = "none (" + s.StateName + ")"
	}
	running := workerHolds(s.StateDir)
	rec, _ := setup.LoadIdentity(s.StateDir)
	lines := []string{
		"Profile: " + label,
		"URL: " + setup.ShownURL(s.APIURL),
		"User: " + userLabel(user.Name, user.UserID),
		"State: " + s.StateDir,
		"Running: " + map[bool]string{true: "yes (a blobhub-worker holds this state tree)", false: "no"}[running],
	}
	if rec != nil && rec.UserID != user.UserID {
		lines = append(lines, fmt.Sprintf("Warning: the state tree was recorded for %s; a run refuses it (USER_IDENTITY_MISMATCH): use the right profile, or bhw-run login --force", rec.UserID))
	}
	return cl.result(strings.Join(lines, "\n"), map[string]any{
		"profile": s.Profile, "label": label, "url": setup.ShownURL(s.APIURL),
		"user": user, "state_directory": s.StateDir, "running": running,
	})
}

func (cl *cliState) profileLs(c *cli.Context) error {
	if c.NArg() != 0 {
		return exit.Usagef("profile ls takes no arguments, got %q", c.Args().Slice())
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return exit.Errorf(exit.CodeInvalidConfig, "cannot find the home folder: %v; set HOME", err)
	}
	profiles, def, err := setup.Profiles(home, cl.secrets)
	if err != nil {
		return err
	}
	type entry struct {
		setup.Profile
		StateDirectory string `json:"state_directory"`
		Tree           bool   `json:"tree"`
		Running        bool   `json:"running"`
	}
	var entries []entry
	var lines []string
	for _, p := range profiles {
		s := &setup.Setup{Profile: p.Name, Home: home}
		if err := s.ResolveStateDir(setup.Options{}, nil); err != nil {
			return err
		}
		_, statErr := os.Stat(s.StateDir)
		e := entry{Profile: p, StateDirectory: s.StateDir, Tree: statErr == nil, Running: workerHolds(s.StateDir)}
		entries = append(entries, e)
		mark, state := " ", "no state"
		if p.Default {
			mark = "*"
		}
		switch {
		case e.Running:
			state = "blobhub-worker running"
		case e.Tree:
			state = "state"
		}
		line := fmt.Sprintf("%s %s (%s) [%s]", mark, p.Name, redact.Shown(setup.ShownURL(p.URL)), state)
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		lines = append(lines, "no profiles in "+setup.CredentialsPath(home)+"; add one with bhw-run login")
	}
	return cl.result(strings.Join(lines, "\n"), map[string]any{"profiles": entries, "default": def, "credentials": setup.CredentialsPath(home)})
}

// codeOf is err's documented code, "" for none.
func codeOf(err error) string {
	var ee *exit.Error
	if errors.As(err, &ee) {
		return ee.Code
	}
	return ""
}

// workerOnly are blobhub-worker's commands bhw-run has no counterpart of,
// with what a worker user means by them here.
var workerOnly = map[string]string{
	"instance": "blobhub-worker's instances are its daemons; bhw-run has none (each run is one process that ends): `bhw-run profile ls` says which state trees a blobhub-worker holds, `bhw-run ls` lists the threads",
	"start":    "bhw-run runs one activation and ends: `bhw-run <alias>` runs one thread, and the README's Run it on a schedule has the cron, systemd and launchd recipes that take the daemon's place",
}

// workerHint is what a word of blobhub-worker's means here ("" for
// another word).
func workerHint(word string) string { return workerOnly[word] }

// workerHolds says whether a live blobhub-worker holds the state tree at
// stateDir (its instance.yaml names a live process), judged as a run and
// doctor judge it.
func workerHolds(stateDir string) bool {
	running, _ := setup.WorkerRunning(filepath.Join(stateDir, "instance.yaml"))
	return running
}
