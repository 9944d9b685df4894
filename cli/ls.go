package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/blobhub/bhw-run/run"
)

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
	bh, err := cl.client(setup, setup.APIKey, "usr_local")
	if err != nil {
		return err
	}
	r := &run.Runner{Setup: setup, Client: bh, Logger: cl.log}
	list, err := r.List(c.Context, run.ListOptions{States: states, Runnable: c.Bool("runnable")})
	if err != nil && !errors.Is(err, run.ErrThreadsUnreadable) {
		return err
	}
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
			state := l.State
			if l.Waiting {
				state = "waiting" // active, parked on a person's answer
			}
			fmt.Fprintf(w, "%s\t%s\n", shown(l.Alias), shown(state))
		}
	}
	// Everything else is listed before a thread whose record cannot be
	// read fails the command.
	return errors.Join(w.Flush(), err)
}
