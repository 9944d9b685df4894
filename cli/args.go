package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
)

// cmdline is the command line as bhw-run reads it, once, before urfave/cli
// sees it: urfave/cli v2 stops reading flags at the first positional and
// reads each flag only at its own level, while bhw-run lets every flag
// stand before or after the alias; and its help for nested commands prints
// a stub, so bhw-run prints that help itself (help.go).
type cmdline struct {
	// argv is what urfave/cli runs: the global flags, the command words,
	// the command's own flags, then "--" and the positionals.
	argv []string
	// path are the command words, outermost first ("thread", "new").
	path []*cli.Command
	// help: --help, -h or the help command asked for the help of path's
	// last command (of the app when path is empty).
	help bool
	// globals are the global flags read so far, for the logger of an error
	// found before urfave/cli runs (--log-format, -v, -q).
	globals map[string]string
}

// parseArgs reads args (args[0] is the program). "--" ends the flags:
// everything after it stays positional, so `bhw-run run -- -x` never reads
// -x as a flag. A word is a command word only while no positional has been
// seen, so `bhw-run run thread` runs the thread called thread.
func parseArgs(app *cli.App, args []string) (cmdline, error) {
	line := cmdline{argv: args, globals: map[string]string{}}
	if len(args) == 0 {
		return line, nil
	}
	rest := args[1:]
	cmds := app.Commands
	var local []cli.Flag // the flags of every command word so far
	var words, globalArgs, flagArgs, pos []string
	dashed := false // the positionals after "--" were given as such
	helpWord := false
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" {
			dashed = len(rest) > i+1
			pos = append(pos, rest[i+1:]...)
			break
		}
		if strings.HasPrefix(a, "-") && a != "-" {
			name, value, hasEq := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if slices.Contains(cli.HelpFlag.Names(), name) {
				line.help = true
				continue
			}
			// Global flags go before the command words; a command's own
			// flags after them (urfave/cli v2 reads each at its level only).
			dst := &flagArgs
			f := lookupFlag(local, name)
			if f == nil {
				f, dst = lookupFlag(app.Flags, name), &globalArgs
			}
			if f == nil {
				return line, unknownFlag(app, line.path, local, a)
			}
			*dst = append(*dst, a)
			_, isBool := f.(*cli.BoolFlag)
			if g, ok := f.(*cli.GenericFlag); ok && !hasEq {
				// A flag whose value may be left out (ls --wait[=MAX]).
				b, ok := g.Value.(interface{ IsBoolFlag() bool })
				isBool = ok && b.IsBoolFlag()
			}
			switch {
			case isBool:
				value = "true"
			case !hasEq:
				if i+1 >= len(rest) {
					return line, exit.Usagef("flag %s needs a value; see %s --help", a, fullName(line.path))
				}
				i++
				value = rest[i]
				*dst = append(*dst, value)
			}
			if dst == &globalArgs {
				line.globals[f.Names()[0]] = value
			}
			continue
		}
		if len(pos) == 0 {
			if c := findCommand(cmds, a); c != nil {
				words = append(words, a)
				line.path = append(line.path, c)
				cmds = c.Subcommands
				local = append(local, c.Flags...)
				continue
			}
			// The help command, where there are commands to ask about:
			// `bhw-run help thread new`, `bhw-run thread help new`.
			if (a == "help" || a == "h") && len(cmds) > 0 && !helpWord {
				line.help, helpWord = true, true
				continue
			}
			if helpWord || len(line.path) > 0 && len(cmds) > 0 {
				return line, unknownCommand(line.path, cmds, a, false)
			}
		}
		pos = append(pos, a)
	}
	// A run takes one alias: at the top level a word that is no command,
	// followed by more words, is a mistyped command rather than an alias
	// (one with a "/" is an alias given with more words, which the run
	// refuses as such).
	if !line.help && !dashed && len(line.path) == 0 && len(pos) > 1 && !strings.Contains(pos[0], "/") {
		return line, unknownCommand(nil, app.Commands, pos[0], true)
	}
	// `bhw-run -- ls` runs the thread ls: urfave/cli would read a word after
	// "--" as a command.
	if len(line.path) == 0 && len(pos) > 0 && (findCommand(app.Commands, pos[0]) != nil || pos[0] == "help" || pos[0] == "h") {
		words = []string{"run"}
	}
	out := []string{args[0]}
	out = append(out, globalArgs...)
	out = append(out, words...)
	out = append(out, flagArgs...)
	if len(pos) > 0 {
		out = append(out, "--")
		out = append(out, pos...)
	}
	line.argv = out
	return line, nil
}

func lookupFlag(fl []cli.Flag, name string) cli.Flag {
	for _, f := range fl {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// fullName is "bhw-run" and the command words of path.
func fullName(path []*cli.Command) string {
	parts := []string{"bhw-run"}
	for _, c := range path {
		parts = append(parts, c.Name)
	}
	return strings.Join(parts, " ")
}

// unknownFlag names the command a mistyped flag was given to, the nearest
// flag it knows and the help that lists them.
func unknownFlag(app *cli.App, path []*cli.Command, local []cli.Flag, given string) error {
	name, _, _ := strings.Cut(strings.TrimLeft(given, "-"), "=")
	var names []string
	for _, f := range append(append([]cli.Flag{}, local...), app.Flags...) {
		names = append(names, f.Names()...)
	}
	names = append(names, cli.HelpFlag.Names()...)
	msg := fmt.Sprintf("unknown flag %s", given)
	if len(path) > 0 {
		msg += " for " + fullName(path)
	}
	if near := nearest(name, names); near != "" {
		msg += "; did you mean " + dashes(near) + "?"
	} else if others := commandsWithFlag(app.Commands, nil, name); len(others) > 0 {
		msg += fmt.Sprintf("; %s is a flag of %s", dashes(name), strings.Join(others, ", "))
	}
	return exit.Usagef("%s%ssee %s --help", msg, sep(msg), fullName(path))
}

// sep goes between a message and "see …": after a question, a space.
func sep(msg string) string {
	if strings.HasSuffix(msg, "?") {
		return " "
	}
	return "; "
}

// commandsWithFlag are the commands under cmds that have the flag name.
func commandsWithFlag(cmds []*cli.Command, path []*cli.Command, name string) []string {
	var out []string
	for _, c := range cmds {
		p := append(slices.Clone(path), c)
		if lookupFlag(c.Flags, name) != nil {
			out = append(out, fullName(p))
		}
		out = append(out, commandsWithFlag(c.Subcommands, p, name)...)
	}
	return out
}

func dashes(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// unknownCommand names a word that is not one of the commands under path,
// with the nearest one; asAlias says how to run a thread of that name.
func unknownCommand(path []*cli.Command, cmds []*cli.Command, word string, asAlias bool) error {
	var names []string
	for _, c := range cmds {
		names = append(names, c.Names()...)
	}
	where := fullName(path)
	msg := fmt.Sprintf("unknown command %s", strings.TrimPrefix(where+" "+word, "bhw-run "))
	if near := nearest(word, names); near != "" {
		msg += "; did you mean " + strings.TrimPrefix(where+" "+near, "bhw-run ") + "?"
	}
	msg += sep(msg) + "see " + where + " --help"
	if h := workerHint(word); h != "" && len(path) == 0 {
		msg += "; " + h
	} else if asAlias {
		msg += " (a run takes one alias: bhw-run <alias>, or bhw-run run -- <alias>)"
	}
	return exit.Usagef("%s", msg)
}

// nearest is the candidate closest to word, when it is close enough to be
// what was meant: at most two edits (one for short words), or word is the
// start of exactly that one candidate.
func nearest(word string, candidates []string) string {
	return envelope.ClosestKey(word, candidates)
}
