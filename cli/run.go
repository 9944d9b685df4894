package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/redact"
	"github.com/blobhub/bhw-run/run"
)

func (cl *cliState) runAlias(c *cli.Context) error {
	alias, setup, bh, err := cl.open(c, 1, false)
	if w := c.Duration("slot-wait"); err == nil && w < 0 {
		// Bounded: a wait for ever would hold the thread lock for ever.
		err = exit.Usagef("--slot-wait %v is negative; pass how long to wait for an agent slot, e.g. 30m (0: fail fast)", w)
	}
	if err != nil {
		// --json promises one summary object, also when no run started.
		ee := exit.Of(err)
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
	return cl.commandHint(err, sum, alias)
}

// commandHint adds to a run of a thread that does not exist the command
// its alias was likely meant to be (`bhw-run thred`).
func (cl *cliState) commandHint(err error, sum *run.Summary, alias string) error {
	var ee *exit.Error
	if !errors.As(err, &ee) || ee.Code != exit.CodeNoThread || strings.Contains(alias, "/") {
		return err
	}
	near := nearest(alias, commandNames(cl.definitions().Commands))
	hint := fmt.Sprintf("; or did you mean the command `bhw-run %s`?", near)
	switch {
	case workerHint(alias) != "":
		hint = "; if you meant blobhub-worker's command: " + workerHint(alias)
	case near == "" || near == alias:
		return err
	}
	hinted := &exit.Error{Exit: ee.Exit, Code: ee.Code, Message: ee.Message + hint, Err: ee.Err}
	if sum != nil && sum.Error != nil {
		sum.Error.Message = hinted.Message
	}
	return hinted
}

// summaryLine is a run's outcome for a person: alias, outcome, exit, and
// the error's code and message, escaped for the terminal.
func summaryLine(s *run.Summary) string {
	outcome := s.Outcome
	if outcome == "" {
		outcome = "error"
	}
	line := fmt.Sprintf("%s: %s (exit %d)", redact.Shown(s.Alias), outcome, s.ExitCode)
	if e := s.Error; e != nil {
		switch {
		case e.Code != "" && e.Message != "":
			line += " " + e.Code + ": " + redact.Shown(e.Message)
		case e.Code != "":
			line += " " + e.Code
		case e.Message != "":
			line += " " + redact.Shown(e.Message)
		}
	}
	return line
}

// parkedHint tells the person at a terminal how to answer a parked
// thread's question.
func parkedHint(alias string) string {
	a := redact.Shown(shellQuote(alias))
	return fmt.Sprintf("%s waits for a person: `bhw-run thread show %s` shows the ❓; answer with `bhw-run thread post %s yes` (or your reason to deny; an option's number for a question), then run `bhw-run %s`", redact.Shown(alias), a, a, a)
}

// failedHint tells the person why a run of a failed thread did nothing,
// and how to run it again.
func failedHint(alias string) string {
	a := redact.Shown(shellQuote(alias))
	return fmt.Sprintf("%s is failed, so no run acts on it: `bhw-run thread show %s` says why and the fix; then `bhw-run thread retry %s`", redact.Shown(alias), a, a)
}
