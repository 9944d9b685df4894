package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"
)

// examples are each command's examples, by its name under bhw-run ("" for
// bhw-run itself); its help prints them.
var examples = map[string][]string{
	"": {
		"bhw-run demo/t1                                   # one activation of the thread demo/t1",
		"bhw-run ls --runnable | xargs -n1 bhw-run run --  # one run per thread that has work",
		"bhw-run thread new --help                         # the help of one command",
	},
	"run": {
		"bhw-run run -- thread        # a thread whose alias is a command name",
		"bhw-run run --json -- demo/t1",
	},
	"ls": {
		"bhw-run ls",
		"bhw-run ls --state failed",
		"bhw-run ls --runnable --print0 | xargs -0 -r -P4 -n1 bhw-run run --slot-wait 1h --",
	},
	"thread": {
		"bhw-run thread new --work-folder ~/src/app --message 'Fix the flaky test' app/flaky",
		"bhw-run thread show app/flaky",
		"bhw-run thread new --help",
	},
	"thread new": {
		"bhw-run thread new --work-folder /srv/checkouts/app --message 'Add a README' app/readme",
		"bhw-run thread new --work-folder \"$PWD\" --agent codex --permissions guarded --policy policy.yaml app/t2",
	},
	"thread edit": {
		"bhw-run thread edit app/readme --work-folder /srv/checkouts/app2",
		"bhw-run thread edit app/readme --model opus --effort high",
		"bhw-run thread edit app/readme --permissions ''      # back to the machine's default",
	},
	"thread post": {
		"bhw-run thread post app/readme 'and add a LICENSE'",
		"bhw-run thread post --as me app/readme yes           # answer a waiting question",
	},
	"thread show": {
		"bhw-run thread show app/readme",
		"bhw-run thread show --follow app/readme",
		"bhw-run thread show --json app/readme | jq .metadata.type",
	},
	"thread stop":  {"bhw-run thread stop app/readme && bhw-run app/readme   # the next run stops it"},
	"thread retry": {"bhw-run thread retry app/readme"},
	"policy": {
		"bhw-run policy explain --command 'git push' app/readme",
	},
	"policy explain": {
		"bhw-run policy explain --command 'rm -rf build' app/readme",
		"bhw-run policy explain --effect write --path /etc/hosts app/readme",
		"bhw-run policy explain --effect network --command https://example.com app/readme",
	},
	"doctor": {
		"bhw-run doctor                                     # one ✓/✗ line a check, with the fix",
		"bhw-run doctor --json | jq -r '.[] | select(.ok | not) | .fix'",
		"BHW_SECTION=backend bhw-run doctor                 # the checks of one section",
	},
	"completion": {
		"source <(bhw-run completion bash)",
		"bhw-run completion zsh > \"${fpath[1]}/_bhw-run\"",
		"bhw-run completion fish > ~/.config/fish/completions/bhw-run.fish",
	},
	"version": {"bhw-run version", "bhw-run --version", "bhw-run version --json"},
}

// examplesHelp is the EXAMPLES section of the command named name.
func examplesHelp(name string) string {
	ex := examples[name]
	if len(ex) == 0 {
		return ""
	}
	return "EXAMPLES:\n   " + strings.Join(ex, "\n   ") + "\n"
}

// printHelp prints the help of the last command of path, in the layout of
// urfave/cli's own: its usage, description, commands, flags and examples.
// urfave/cli v2 prints a stub for a command below another one, so the help
// of every command is printed here, from the same definitions.
func (cl *cliState) printHelp(path []*cli.Command) {
	c := path[len(path)-1]
	name := fullName(path)
	var b strings.Builder
	fmt.Fprintf(&b, "NAME:\n   %s - %s\n\nUSAGE:\n   %s", name, c.Usage, name)
	if len(c.Subcommands) > 0 {
		b.WriteString(" <command>")
	}
	if len(c.Flags) > 0 {
		b.WriteString(" [options]")
	}
	if args := strings.TrimSpace(c.ArgsUsage); args != "" {
		b.WriteString(" " + args)
	}
	b.WriteString("\n")
	if c.Description != "" {
		b.WriteString("\nDESCRIPTION:\n   " + strings.ReplaceAll(c.Description, "\n", "\n   ") + "\n")
	}
	tw := tabwriter.NewWriter(&b, 1, 8, 2, ' ', 0)
	if len(c.Subcommands) > 0 {
		b.WriteString("\nCOMMANDS:\n")
		for _, sc := range c.Subcommands {
			if !sc.Hidden {
				fmt.Fprintf(tw, "   %s\t%s\n", sc.Name, sc.Usage)
			}
		}
		tw.Flush()
	}
	b.WriteString("\nOPTIONS:\n")
	for _, f := range append(append([]cli.Flag{}, c.Flags...), cli.HelpFlag) {
		fmt.Fprintf(tw, "   %s\n", f.String())
	}
	tw.Flush()
	if ex := examplesHelp(strings.TrimPrefix(name, "bhw-run ")); ex != "" {
		b.WriteString("\n" + ex)
	}
	b.WriteString("\nGLOBAL OPTIONS:\n   --json, --api-url, --session, --profile, … stand before or after the command: see bhw-run --help\n")
	if len(c.Subcommands) > 0 {
		fmt.Fprintf(&b, "\nRun `%s <command> --help` for the flags and examples of one command.\n", name)
	}
	_, _ = io.WriteString(cl.stdout, b.String())
}
