package cli

// Shell completion (`bhw-run completion bash|zsh|fish`) and the man page
// (`bhw-run man`), both made from the command definitions the CLI runs
// with, so neither can drift from the flags bhw-run accepts. The scripts
// are static: a TAB never starts bhw-run (nor asks BlobHub for aliases);
// bash's completes thread aliases from the local state tree on disk.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/policy"
	"github.com/blobhub/bhw-run/run"
	"github.com/blobhub/bhw-run/setup"
)

// shells are the shells `bhw-run completion` writes a script for.
var shells = []string{"bash", "zsh", "fish"}

func (cl *cliState) completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print the shell completion script for " + strings.Join(shells, ", ") + " (make install installs them)",
		ArgsUsage: strings.Join(shells, "|"),
		Description: "The script completes commands, flags and the values of the flags that take a few known ones.\n" +
			"make install puts each where its shell looks: share/bash-completion/completions/bhw-run,\n" +
			"share/zsh/site-functions/_bhw-run and share/fish/vendor_completions.d/bhw-run.fish under PREFIX.",
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 || !slices.Contains(shells, c.Args().First()) {
				return exit.Usagef("completion expects one of %s, got %q", strings.Join(shells, ", "), c.Args().Slice())
			}
			tree := cl.completionTree(cl.definitions())
			var script string
			switch c.Args().First() {
			case "bash":
				script = bashCompletion(tree)
			case "zsh":
				script = zshCompletion(tree)
			case "fish":
				script = fishCompletion(tree)
			}
			_, err := fmt.Fprint(cl.stdout, script)
			return err
		},
	}
}

func (cl *cliState) manCommand() *cli.Command {
	return &cli.Command{
		Name:   "man",
		Usage:  "print the man page (roff; make install installs it as bhw-run.1)",
		Hidden: true,
		Action: func(c *cli.Context) error {
			page, err := manPage(cl.definitions())
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(cl.stdout, page)
			return err
		},
	}
}

// definitions is the CLI's app as defined, before urfave/cli adds its help
// commands and flags to whichever command runs: the same tree whichever
// command prints it.
func (cl *cliState) definitions() *cli.App {
	return (&cliState{adapters: cl.adapters}).app()
}

// manPage is the man page of app (section 1), written as roff from the
// command definitions: name, synopsis, description, the global flags, each
// command with its flags, then the exit codes from exit.Classes. It is written
// here rather than by urfave/cli's ToMan, whose markdown step pulls a
// markdown parser into the binary (its package initialisation cost every
// run about half a millisecond of CPU; the Makefile builds with
// urfave_cli_no_docs) and ate words in angle brackets such as <alias>.
func manPage(app *cli.App) (string, error) {
	var b strings.Builder
	b.WriteString(".TH bhw-run 1\n.nh\n.ad l\n")
	fmt.Fprintf(&b, ".SH NAME\n%s \\- %s\n", app.Name, roff(app.Usage))
	b.WriteString(".SH SYNOPSIS\n.nf\n")
	for _, l := range strings.Split(strings.Trim(app.UsageText, "\n"), "\n") {
		fmt.Fprintf(&b, "%s\n", roff(strings.TrimSpace(l)))
	}
	b.WriteString(".fi\n.SH DESCRIPTION\n")
	b.WriteString("bhw-run runs one activation of one BlobHub thread and exits: it takes the thread's lock, " +
		"reads its envelope and local state, drives the coding agent until its turn ends or it must wait for a person, " +
		"relays what the agent does to the thread, gates its calls, and exits with a code a scheduler understands. " +
		"Discovery and scheduling are the caller's: cron, a systemd timer, a CI job, a shell. " +
		"Run bhw-run doctor to check a set-up.\n")
	b.WriteString(".SH GLOBAL OPTIONS\n")
	manFlags(&b, append(slices.Clone(app.Flags), cli.HelpFlag))
	b.WriteString(".SH COMMANDS\n")
	var walk func(path string, cmds []*cli.Command)
	walk = func(path string, cmds []*cli.Command) {
		for _, c := range cmds {
			if c.Hidden {
				continue
			}
			name := strings.TrimSpace(path + " " + c.Name)
			fmt.Fprintf(&b, ".SS \"%s\"\n%s\n", roff(name), roff(c.Usage))
			if strings.TrimSpace(c.ArgsUsage) != "" {
				fmt.Fprintf(&b, ".PP\n.B bhw-run %s\n%s\n", roff(name), roff(c.ArgsUsage))
			}
			if c.Description != "" {
				// Its lines stay lines (.br), each filled to the page.
				b.WriteString(".PP\n")
				for i, l := range strings.Split(strings.Trim(c.Description, "\n"), "\n") {
					if i > 0 {
						b.WriteString(".br\n")
					}
					fmt.Fprintf(&b, "%s\n", roff(l))
				}
			}
			manFlags(&b, c.Flags)
			walk(name, c.Subcommands)
		}
	}
	walk("", app.Commands)
	b.WriteString(".SH EXIT CODES\n")
	for _, c := range exit.Classes {
		fmt.Fprintf(&b, ".TP\n\\fB%s\\fP\n%s\n", roff(c.Label), roff(c.Help))
	}
	b.WriteString(".SH FILES\n.TP\n\\fI~/.blobhub/credentials.yaml\\fP\nthe API keys, shared with the BlobHub CLI (mode 0600)\n" +
		".TP\n\\fI~/.blobhub-worker/profiles/<name>/\\fP\nthe state tree: config.yaml, identity.yaml, the agent slots, and one folder per session with its threads' records and logs\n")
	return asciiRoff(b.String()), nil
}

// manFlags writes one tagged paragraph per visible flag: its names, VALUE
// when it takes one, its usage and its default.
func manFlags(b *strings.Builder, flags []cli.Flag) {
	for _, f := range flags {
		if vf, ok := f.(cli.VisibleFlag); ok && !vf.IsVisible() {
			continue
		}
		var names []string
		for _, n := range f.Names() {
			dash := "--"
			if len(n) == 1 {
				dash = "-"
			}
			names = append(names, `\fB`+roff(dash+n)+`\fP`)
		}
		tag := strings.Join(names, ", ")
		usage := ""
		if df, ok := f.(cli.DocGenerationFlag); ok {
			usage = df.GetUsage()
			if df.TakesValue() {
				tag += ` \fIVALUE\fP`
				if d := df.GetDefaultText(); d != "" && d != `""` {
					usage += " (default: " + d + ")"
				}
			}
		}
		fmt.Fprintf(b, ".TP\n%s\n%s\n", tag, roff(usage))
	}
}

// asciiRoff spells every non-ASCII character as a groff escape (\[u2026]):
// troff reads its input as Latin-1 unless a preprocessor converts it first,
// and not every man does.
func asciiRoff(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 0x80 {
			b.WriteRune(r)
		} else {
			fmt.Fprintf(&b, `\[u%04X]`, r)
		}
	}
	return b.String()
}

// roff escapes text for a man page line.
func roff(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// compFlag is one flag as a completion script sees it.
type compFlag struct {
	Names  []string // with their dashes: --verbose, -v
	Value  bool     // takes a value
	Usage  string
	Values []string // the values it takes, when they are few and known
}

// compCmd is one command (or subcommand) word.
type compCmd struct {
	Name, Usage string
}

// compNode is one command path ("" the top level, "thread new") with the
// words that may follow it and the flags it adds to its parents'.
type compNode struct {
	Path  string
	Subs  []compCmd
	Flags []compFlag
	Args  []string // what the command's positional argument may be, when few and known
	// Aliases: the argument is an existing thread's alias, which the
	// scripts complete from the local state tree.
	Aliases bool
}

// compTree is every command path, the top level first; the top level's
// flags are the global ones, accepted anywhere (bhw-run reorders argv).
type compTree []compNode

// flagValues are the values of the flags that take a few known ones.
func (cl *cliState) flagValues() map[string][]string {
	return map[string][]string{
		"log-format":  {"auto", "text", "json"},
		"agent":       cl.runnableTypes(),
		"permissions": {setup.PermAutonomous, setup.PermGuarded, setup.PermApproval},
		"effect":      {policy.EffectRead, policy.EffectWrite, policy.EffectExec, policy.EffectNetwork},
		"state":       {envelope.StatePending, envelope.StateActive, envelope.StateCompleted, envelope.StateFailed, run.StateNone},
	}
}

// completionTree walks app's commands.
func (cl *cliState) completionTree(app *cli.App) compTree {
	values := cl.flagValues()
	flags := func(fl []cli.Flag) []compFlag {
		var out []compFlag
		for _, f := range fl {
			if vf, ok := f.(cli.VisibleFlag); ok && !vf.IsVisible() {
				continue
			}
			cf := compFlag{}
			for _, n := range f.Names() {
				dash := "--"
				if len(n) == 1 {
					dash = "-"
				}
				cf.Names = append(cf.Names, dash+n)
			}
			if df, ok := f.(cli.DocGenerationFlag); ok {
				cf.Value, cf.Usage = df.TakesValue(), df.GetUsage()
			}
			cf.Values = values[f.Names()[0]]
			out = append(out, cf)
		}
		return out
	}
	var tree compTree
	var walk func(path string, cmds []*cli.Command, fl []cli.Flag, cmd *cli.Command)
	walk = func(path string, cmds []*cli.Command, fl []cli.Flag, cmd *cli.Command) {
		n := compNode{Path: path, Flags: flags(fl)}
		if path == "" {
			n.Flags = append(n.Flags, flags([]cli.Flag{cli.HelpFlag})...)
		}
		if cmd != nil && cmd.Name == "completion" {
			n.Args = shells
		}
		// Every <alias> names an existing thread but thread new's.
		n.Aliases = cmd == nil || strings.HasPrefix(cmd.ArgsUsage, "<alias>") && cmd.Name != "new"

		for _, c := range cmds {
			if c.Hidden {
				continue
			}
			for _, name := range c.Names() {
				n.Subs = append(n.Subs, compCmd{Name: name, Usage: c.Usage})
			}
		}
		tree = append(tree, n)
		for _, c := range cmds {
			if c.Hidden {
				continue
			}
			walk(strings.TrimSpace(path+" "+c.Name), c.Subcommands, c.Flags, c)
		}
	}
	walk("", app.Commands, app.Flags, nil)
	// urfave/cli adds `help` (alias h) at the top when it runs.
	tree[0].Subs = append(tree[0].Subs, compCmd{"help", "show the commands, or one command's help"}, compCmd{"h", "show the commands, or one command's help"})
	return tree
}

// valueFlags are the flag names (with dashes) that take a value.
func (t compTree) valueFlags() []string {
	var out []string
	for _, n := range t {
		for _, f := range n.Flags {
			if f.Value {
				out = append(out, f.Names...)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// flagChoices maps each flag name with known values to them.
func (t compTree) flagChoices() map[string][]string {
	out := map[string][]string{}
	for _, n := range t {
		for _, f := range n.Flags {
			for _, name := range f.Names {
				if len(f.Values) > 0 {
					out[name] = f.Values
				}
			}
		}
	}
	return out
}

func names(subs []compCmd) string {
	var out []string
	for _, s := range subs {
		out = append(out, s.Name)
	}
	return strings.Join(out, " ")
}

func flagNames(fl []compFlag) string {
	var out []string
	for _, f := range fl {
		out = append(out, f.Names...)
	}
	return strings.Join(out, " ")
}

// shq quotes s for a POSIX shell, and for fish, in single quotes.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// fishq quotes s for fish, in single quotes (fish escapes with \).
func fishq(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// walkComment is the rule each script follows to find the command path.
const walkComment = `The words before the cursor name the command: a word that is a subcommand
# of the path so far extends it until the first positional argument; flags
# stand anywhere (bhw-run reorders them), a flag that takes a value takes
# the next word with it, and -- ends the flags.`

// shellWalkFlags is the part of the walk bash and zsh share, in their
// common syntax: a word a flag's value, every word after --, --, a flag.
const shellWalkFlags = `		if ((skip)); then
			skip=0
			continue
		fi
		if ((dashdash)); then
			positional=1
			continue
		fi
		case "$word" in
		--) dashdash=1 ;;
		-*)
			if [[ "$word" != *=* ]] && __bhw_run_takes_value "$word"; then
				skip=1
			fi
			;;
`

func bashCompletion(t compTree) string {
	var b strings.Builder
	b.WriteString(`# bash completion for bhw-run, made by ` + "`bhw-run completion bash`" + ` from its command
# definitions. Source it, or install it as
# /usr/local/share/bash-completion/completions/bhw-run (make install does).

__bhw_run_subs() {
	case "$1" in
`)
	for _, n := range t {
		if len(n.Subs) > 0 {
			fmt.Fprintf(&b, "\t%s) echo %s ;;\n", shq(n.Path), shq(names(n.Subs)))
		}
	}
	b.WriteString("\tesac\n}\n\n__bhw_run_flags() {\n\tcase \"$1\" in\n")
	for _, n := range t {
		if len(n.Flags) > 0 {
			fmt.Fprintf(&b, "\t%s) echo %s ;;\n", shq(n.Path), shq(flagNames(n.Flags)))
		}
	}
	b.WriteString("\tesac\n}\n\n__bhw_run_args() {\n\tcase \"$1\" in\n")
	for _, n := range t {
		if len(n.Args) > 0 {
			fmt.Fprintf(&b, "\t%s) echo %s ;;\n", shq(n.Path), shq(strings.Join(n.Args, " ")))
		}
	}
	fmt.Fprintf(&b, "\tesac\n}\n\n__bhw_run_takes_value() {\n\tcase \"$1\" in\n\t%s) return 0 ;;\n\tesac\n\treturn 1\n}\n\n", strings.Join(t.valueFlags(), "|"))
	var aliasPaths []string
	for _, n := range t {
		if n.Aliases {
			aliasPaths = append(aliasPaths, shq(n.Path))
		}
	}
	fmt.Fprintf(&b, "__bhw_run_takes_alias() {\n\tcase \"$1\" in\n\t%s) return 0 ;;\n\tesac\n\treturn 1\n}\n\n", strings.Join(aliasPaths, "|"))
	b.WriteString(bashAliases)
	b.WriteString("__bhw_run_values() {\n\tcase \"$1\" in\n")
	choices := t.flagChoices()
	for _, name := range sortedKeys(choices) {
		fmt.Fprintf(&b, "\t%s) echo %s ;;\n", name, shq(strings.Join(choices[name], " ")))
	}
	b.WriteString(`	esac
}

# ` + walkComment + `
_bhw_run() {
	local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"
	local cmdpath="" word next positional=0 dashdash=0 skip=0 i
	for ((i = 1; i < COMP_CWORD; i++)); do
		word="${COMP_WORDS[i]}"
` + shellWalkFlags + `		*)
			if ((!positional)) && [[ " $(__bhw_run_subs "$cmdpath") " == *" $word "* ]]; then
				cmdpath="${cmdpath:+$cmdpath }$word"
			else
				positional=1
			fi
			;;
		esac
	done
	COMPREPLY=()
	if ((skip)); then
		next="$(__bhw_run_values "$prev")"
		if [[ -n "$next" ]]; then
			COMPREPLY=($(compgen -W "$next" -- "$cur"))
		fi
		return 0
	fi
	if ((!dashdash)) && [[ "$cur" == -* ]]; then
		local flags="" p="$cmdpath"
		while :; do
			flags="$flags $(__bhw_run_flags "$p")"
			[[ -z "$p" ]] && break
			if [[ "$p" == *" "* ]]; then p="${p% *}"; else p=""; fi
		done
		COMPREPLY=($(compgen -W "$flags" -- "$cur"))
		return 0
	fi
	if ((!positional)); then
		next="$(__bhw_run_subs "$cmdpath") $(__bhw_run_args "$cmdpath")"
		if __bhw_run_takes_alias "$cmdpath"; then
			next="$next $(__bhw_run_aliases)"
		fi
		COMPREPLY=($(compgen -W "$next" -- "$cur"))
	fi
	return 0
}

complete -o default -F _bhw_run bhw-run
`)
	return b.String()
}

// bashAliases lists the aliases of the threads the state trees on this
// machine hold ($BHW_STATE_DIR, else every profile's): each thread's
// folder under jobs/*/threads/ has a thread.yaml. It reads the disk only,
// so a TAB still never starts bhw-run nor asks BlobHub; the list is capped.
const bashAliases = `__bhw_run_aliases() {
	local roots=()
	if [[ -n "${BHW_STATE_DIR:-}" ]]; then
		roots=("$BHW_STATE_DIR")
	else
		roots=("$HOME"/.blobhub-worker/profiles/*)
	fi
	find "${roots[@]}" -mindepth 5 -maxdepth 20 -path '*/jobs/*/threads/*' -name thread.yaml 2>/dev/null |
		head -n 2000 | sed -e 's|.*/jobs/[^/]*/threads/||' -e 's|/thread\.yaml$||'
}

`

func zshCompletion(t compTree) string {
	var b strings.Builder
	b.WriteString(`#compdef bhw-run
# zsh completion for bhw-run, made by ` + "`bhw-run completion zsh`" + ` from its command
# definitions. Put it in a folder of $fpath as _bhw-run (make install puts it
# in /usr/local/share/zsh/site-functions), or source it after compinit.

__bhw_run_subs() {
	case "$1" in
`)
	for _, n := range t {
		if len(n.Subs) == 0 {
			continue
		}
		var lines []string
		for _, s := range n.Subs {
			lines = append(lines, shq(s.Name+":"+s.Usage))
		}
		fmt.Fprintf(&b, "\t%s) reply=(%s) ;;\n", shq(n.Path), strings.Join(lines, " "))
	}
	b.WriteString("\t*) reply=() ;;\n\tesac\n}\n\n__bhw_run_flags() {\n\tcase \"$1\" in\n")
	for _, n := range t {
		if len(n.Flags) == 0 {
			continue
		}
		var lines []string
		for _, f := range n.Flags {
			for _, name := range f.Names {
				lines = append(lines, shq(name+":"+f.Usage))
			}
		}
		fmt.Fprintf(&b, "\t%s) reply=(%s) ;;\n", shq(n.Path), strings.Join(lines, " "))
	}
	b.WriteString("\t*) reply=() ;;\n\tesac\n}\n\n__bhw_run_args() {\n\tcase \"$1\" in\n")
	for _, n := range t {
		if len(n.Args) > 0 {
			fmt.Fprintf(&b, "\t%s) reply=(%s) ;;\n", shq(n.Path), strings.Join(n.Args, " "))
		}
	}
	fmt.Fprintf(&b, "\t*) reply=() ;;\n\tesac\n}\n\n__bhw_run_takes_value() {\n\tcase \"$1\" in\n\t%s) return 0 ;;\n\tesac\n\treturn 1\n}\n\n", strings.Join(t.valueFlags(), "|"))
	b.WriteString("__bhw_run_values() {\n\tcase \"$1\" in\n")
	choices := t.flagChoices()
	for _, name := range sortedKeys(choices) {
		fmt.Fprintf(&b, "\t%s) reply=(%s) ;;\n", name, strings.Join(choices[name], " "))
	}
	b.WriteString(`	*) reply=() ;;
	esac
}

# ` + walkComment + `
_bhw_run() {
	local cmdpath="" word p positional=0 dashdash=0 skip=0 i
	local -a reply cands
	for ((i = 2; i < CURRENT; i++)); do
		word="${words[i]}"
` + shellWalkFlags + `		*)
			__bhw_run_subs "$cmdpath"
			if ((!positional)) && ((${reply[(I)${word}:*]})); then
				cmdpath="${cmdpath:+$cmdpath }$word"
			else
				positional=1
			fi
			;;
		esac
	done
	if ((skip)); then
		__bhw_run_values "${words[CURRENT-1]}"
		if ((${#reply})); then
			compadd -a reply
		else
			_files
		fi
		return
	fi
	if ((!dashdash)) && [[ "${words[CURRENT]}" == -* ]]; then
		p="$cmdpath"
		while :; do
			__bhw_run_flags "$p"
			cands+=("${reply[@]}")
			[[ -z "$p" ]] && break
			if [[ "$p" == *" "* ]]; then p="${p% *}"; else p=""; fi
		done
		_describe -t flags 'flag' cands
		return
	fi
	if ((!positional)); then
		__bhw_run_subs "$cmdpath"
		cands=("${reply[@]}")
		__bhw_run_args "$cmdpath"
		cands+=("${reply[@]}")
		if ((${#cands})); then
			_describe -t commands 'command' cands
			return
		fi
	fi
	_files
}

if [[ "${zsh_eval_context[-1]}" == loadautofunc ]]; then
	_bhw_run "$@"
else
	compdef _bhw_run bhw-run
fi
`)
	return b.String()
}

func fishCompletion(t compTree) string {
	var b strings.Builder
	b.WriteString(`# fish completion for bhw-run, made by ` + "`bhw-run completion fish`" + ` from its command
# definitions. Put it in ~/.config/fish/completions/bhw-run.fish (make install
# puts it in /usr/local/share/fish/vendor_completions.d).

function __bhw_run_subs
    switch "$argv[1]"
`)
	for _, n := range t {
		if len(n.Subs) > 0 {
			fmt.Fprintf(&b, "        case %s\n            echo %s\n", fishq(n.Path), fishq(names(n.Subs)))
		}
	}
	fmt.Fprintf(&b, "    end\nend\n\nfunction __bhw_run_takes_value\n    contains -- $argv[1] %s\nend\n\n", strings.Join(t.valueFlags(), " "))
	b.WriteString(`# ` + walkComment + `
# It prints the path, and "positional" once a positional argument was seen.
function __bhw_run_state
    set -l words (commandline -opc)
    set -e words[1]
    set -l cmdpath
    set -l positional 0
    set -l dashdash 0
    set -l skip 0
    for word in $words
        if test $skip = 1
            set skip 0
            continue
        end
        if test $dashdash = 1
            set positional 1
            continue
        end
        switch $word
            case --
                set dashdash 1
            case '-*'
                if not string match -q -- '*=*' $word; and __bhw_run_takes_value $word
                    set skip 1
                end
            case '*'
                if test $positional = 0; and contains -- $word (string split ' ' -- (__bhw_run_subs (string join ' ' -- $cmdpath)))
                    set -a cmdpath $word
                else
                    set positional 1
                end
        end
    end
    echo (string join ' ' -- $cmdpath)
    if test $positional = 1
        echo positional
    end
end

# __bhw_run_at PATH: the words so far name the command PATH, and no
# positional argument was given yet.
function __bhw_run_at
    set -l state (__bhw_run_state)
    test (count $state) -ge 1; or set state ''
    test "$state[1]" = "$argv[1]"; and test (count $state) -lt 2
end

# __bhw_run_in PATH: the command is PATH or one below it (its flags apply).
function __bhw_run_in
    set -l state (__bhw_run_state)
    test (count $state) -ge 1; or set state ''
    test -z "$argv[1]"; or test "$state[1]" = "$argv[1]"; or string match -q -- "$argv[1] *" "$state[1]"
end

complete -c bhw-run -f
`)
	for _, n := range t {
		for _, s := range n.Subs {
			fmt.Fprintf(&b, "complete -c bhw-run -n %s -a %s -d %s\n", fishq("__bhw_run_at "+fishq(n.Path)), fishq(s.Name), fishq(s.Usage))
		}
		for _, a := range n.Args {
			fmt.Fprintf(&b, "complete -c bhw-run -n %s -a %s\n", fishq("__bhw_run_at "+fishq(n.Path)), fishq(a))
		}
		for _, f := range n.Flags {
			var opts []string
			for _, name := range f.Names {
				if strings.HasPrefix(name, "--") {
					opts = append(opts, "-l "+fishq(strings.TrimPrefix(name, "--")))
				} else {
					opts = append(opts, "-s "+fishq(strings.TrimPrefix(name, "-")))
				}
			}
			switch {
			case len(f.Values) > 0:
				opts = append(opts, "-x -a "+fishq(strings.Join(f.Values, " ")))
			case f.Value:
				opts = append(opts, "-r -F")
			}
			cond := ""
			if n.Path != "" {
				cond = " -n " + fishq("__bhw_run_in "+fishq(n.Path))
			}
			fmt.Fprintf(&b, "complete -c bhw-run%s %s -d %s\n", cond, strings.Join(opts, " "), fishq(f.Usage))
		}
	}
	return b.String()
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
