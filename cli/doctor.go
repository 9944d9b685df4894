package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/redact"
	"github.com/blobhub/bhw-run/run"
)

// doctorCommand is `bhw-run doctor`: what a scheduled run needs, one line
// a check.
func (cl *cliState) doctorCommand() *cli.Command {
	return &cli.Command{
		Name:  "doctor",
		Usage: "check what a scheduled run needs, one ✓/✗ line each with the fix (exit 78 when one fails)",
		Description: "Checks the credentials (found, mode 0600), BlobHub (reachable, the key valid), the config, the section and its\n" +
			"session, the state tree (writable, mode 0700, no blobhub-worker running on it), each agent a thread may use\n" +
			"(found, its version, a key or login file it can log in with, its preflight such as the Codex sandbox) and the\n" +
			"agent slots. It runs no thread, asks no model, and writes nothing but the state tree's folder when there is\n" +
			"none yet (as a run would make it).",
		ArgsUsage: " ",
		Action:    cl.doctor,
	}
}

func (cl *cliState) doctor(c *cli.Context) error {
	if c.NArg() != 0 {
		return exit.Usagef("doctor takes no arguments, got %q", c.Args().Slice())
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	checks := run.Doctor(ctx, cl.options(c))
	failed, skipped := 0, 0
	for _, ch := range checks {
		switch {
		case notChecked(ch):
			skipped++
		case !ch.OK:
			failed++
		}
	}
	if cl.jsonOut {
		b, _ := json.Marshal(checks)
		fmt.Fprintln(cl.stdout, string(redact.ShownJSON(b)))
	} else {
		color := cl.stdoutTTY
		for _, ch := range checks {
			fmt.Fprintln(cl.stdout, doctorLine(ch, color))
		}
	}
	msg := fmt.Sprintf("all %d checks hold", len(checks))
	if failed+skipped > 0 {
		msg = fmt.Sprintf("%d of %d checks failed", failed, len(checks))
		if skipped > 0 {
			msg += fmt.Sprintf(", %d not checked", skipped)
		}
		msg += "; fix what they say and run bhw-run doctor again"
	}
	if !cl.jsonOut {
		// The last line sums the checks up, as a line like theirs.
		fmt.Fprintln(cl.stdout, doctorLine(run.Check{Check: "doctor", Detail: msg, OK: failed+skipped == 0}, cl.stdoutTTY))
		cl.outcomeShown = true
	}
	if failed+skipped > 0 {
		return &exit.Error{Exit: exit.Config, Message: msg}
	}
	return nil
}

// doctorLine is one check for a person: the mark, the check, what was
// found, and for a failed one the fix.
func doctorLine(ch run.Check, color bool) string {
	mark, on, off := "✓", "\x1b[92m", "\x1b[0m"
	switch {
	case notChecked(ch):
		mark, on = "–", "\x1b[2m"
	case !ch.OK:
		mark, on = "✗", "\x1b[91m"
	}
	if !color {
		on, off = "", ""
	}
	// Details quote what BlobHub and the agents answered: escaped.
	line := fmt.Sprintf("%s%s%s %s: %s", on, mark, off, ch.Check, redact.Shown(ch.Detail))
	if !ch.OK && !notChecked(ch) && ch.Fix != "" {
		// Most fixes begin with the verb: "fix: fix …" says it twice.
		line += " — fix: " + redact.Shown(strings.TrimPrefix(ch.Fix, "fix "))
	}
	return line
}

// notChecked is a check that could not run because an earlier one failed.
func notChecked(ch run.Check) bool { return !ch.OK && strings.HasPrefix(ch.Detail, run.NotChecked) }
