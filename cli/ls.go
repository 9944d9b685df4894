package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/redact"
	"github.com/blobhub/bhw-run/run"
	"github.com/blobhub/bhw-run/setup"
)

// ls is discovery for schedulers: what a pass should run.
func (cl *cliState) ls(c *cli.Context) error {
	if c.NArg() != 0 {
		return exit.Usagef("ls takes no arguments, got %q; pick the section with --section", c.Args().Slice())
	}
	var states []string
	for _, s := range strings.Split(c.String("state"), ",") {
		switch s = strings.TrimSpace(s); s {
		case "":
		case "pending", "active", "completed", "failed", run.StateNone:
			states = append(states, s)
		default:
			return exit.Usagef("--state %q: use pending, active, completed, failed or none, comma-separated", s)
		}
	}
	if c.Bool("print0") && cl.jsonOut {
		return exit.Usagef("--print0 and --json exclude each other; pick one")
	}
	setup, err := setup.Resolve(cl.options(c), "")
	if err != nil {
		return err
	}
	bh, err := cl.client(setup, setup.APIKey, "usr_local")
	if err != nil {
		return err
	}
	wait, _ := c.Generic("wait").(*waitFlag)
	if wait != nil && wait.on && (!c.Bool("runnable") || len(states) > 0) {
		return exit.Usagef("--wait waits for a runnable thread: give it with --runnable, without --state")
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
		fmt.Fprintln(w, string(redact.ShownJSON(b)))
	case c.Bool("print0"):
		for _, l := range list {
			fmt.Fprintf(w, "%s\x00", l.Alias)
		}
	case c.Bool("runnable"):
		// Bare aliases, one a line: `ls --runnable | xargs -n1 bhw-run run --`.
		for _, l := range list {
			fmt.Fprintln(w, redact.Shown(l.Alias))
		}
	default:
		for _, l := range list {
			state := l.State
			if l.Waiting {
				state = "waiting" // active, parked on a person's answer
			}
			fmt.Fprintf(w, "%s\t%s\n", redact.Shown(l.Alias), redact.Shown(state))
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
