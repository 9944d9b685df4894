package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// reorderArgs moves flags before positional arguments at every command
// level, because urfave/cli v2 stops parsing flags at the first positional
// while bhw-run lets flags stand after the alias. "--" ends the flags: everything after it stays positional, so
// `bhw-run run -- -x` never reads -x as a flag.
func reorderArgs(app *cli.App, args []string) ([]string, error) {
	if len(args) == 0 {
		return args, nil
	}
	out := []string{args[0]}
	rest := args[1:]
	flags := app.Flags
	var cmds []*cli.Command = app.Commands
	var words []string
	var globalArgs, flagArgs, pos []string
	takesValue := func(name string, fl []cli.Flag) (bool, bool) {
		for _, f := range fl {
			for _, n := range f.Names() {
				if n == name {
					_, isBool := f.(*cli.BoolFlag)
					return !isBool, true
				}
			}
		}
		return false, false
	}
	global := append([]cli.Flag{}, flags...)
	global = append(global, cli.HelpFlag)
	var local []cli.Flag
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" {
			pos = append(pos, rest[i+1:]...)
			break
		}
		if strings.HasPrefix(a, "-") && a != "-" {
			name := strings.TrimLeft(a, "-")
			name, _, hasEq := strings.Cut(name, "=")
			// Global flags go before the command words; a command's own
			// flags after them (urfave/cli v2 reads each at its level only).
			dst := &flagArgs
			val, known := takesValue(name, local)
			if !known {
				val, known = takesValue(name, global)
				dst = &globalArgs
			}
			if !known {
				return nil, fmt.Errorf("unknown flag %s; see bhw-run --help", a)
			}
			*dst = append(*dst, a)
			if val && !hasEq {
				if i+1 >= len(rest) {
					return nil, fmt.Errorf("flag %s needs a value", a)
				}
				i++
				*dst = append(*dst, rest[i])
			}
			continue
		}
		// A command word, only while no positional has been seen.
		if len(pos) == 0 {
			if c := findCommand(cmds, a); c != nil {
				words = append(words, a)
				cmds = c.Subcommands
				local = append(local, c.Flags...)
				continue
			}
		}
		pos = append(pos, a)
	}
	out = append(out, globalArgs...)
	out = append(out, words...)
	out = append(out, flagArgs...)
	if len(pos) > 0 {
		out = append(out, "--")
		out = append(out, pos...)
	}
	return out, nil
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.Name == name || c.HasName(name) {
			return c
		}
	}
	return nil
}
