package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/redact"
	"github.com/blobhub/bhw-run/setup"
)

// threadCommand wires the person's side: thread new|edit|post|show|stop|retry.
func (cl *cliState) threadCommand() *cli.Command {
	asFlag := &cli.StringFlag{Name: "as", Usage: "post with this credentials profile (the person's, not the runner's)"}
	return &cli.Command{
		Name:  "thread",
		Usage: "the person's side: create, change, post to, show, stop or retry a thread",
		Subcommands: []*cli.Command{
			{
				Name: "new", Usage: "hand off a new thread (state pending)", ArgsUsage: "<alias>",
				Description: "Checks first what holds on every machine — an absolute work folder, a known agent type and\n" +
					"posture, a policy that parses, the model, effort and outbox — and refuses with the activation\n" +
					"checklist's code (exit 64), writing nothing. A work folder missing here is only a warning: the\n" +
					"runner may be another host.",
				Flags: append([]cli.Flag{asFlag}, append(cl.fieldFlags(false),
					&cli.StringFlag{Name: "message", Usage: "the first message to the agent"})...),
				Action: func(c *cli.Context) error {
					return cl.person(c, 1, func(ctx context.Context, s *setup.Setup, bh blobhub.Client, alias string) error {
						f := fieldsOf(c)
						res, err := threadNew(ctx, s, bh, alias, f, c.String("message"), cl.warn)
						if err != nil {
							return cl.handOffRefused(err, f)
						}
						return cl.result(handedOff(alias, c.String("message")), res)
					})
				},
			},
			{
				Name: "edit", Usage: "change the fields a person owns: work folder, agent, permissions, model, effort, …", ArgsUsage: "<alias>",
				Description: "Writes only the fields given, keeping every other key of the envelope, after the checks of\n" +
					"thread new. The work folder, agent type and executable are fixed when a thread is activated:\n" +
					"editing one of them sets an active thread back to pending, so the next run activates it\n" +
					"again with the new values (in a new agent session). The others take effect on the next turn.\n" +
					"An empty value removes an optional field (the machine's default applies).",
				Flags: append([]cli.Flag{asFlag}, cl.fieldFlags(true)...),
				Action: func(c *cli.Context) error {
					return cl.person(c, 1, func(ctx context.Context, s *setup.Setup, bh blobhub.Client, alias string) error {
						f := fieldsOf(c)
						res, err := threadEdit(ctx, s, bh, alias, f, cl.warn)
						if err != nil {
							return cl.handOffRefused(err, f)
						}
						return cl.result(editSummary(res), res)
					})
				},
			},
			{
				Name: "post", Usage: "post a person's item (also answers a waiting question)", ArgsUsage: "<alias> TEXT",
				Flags: []cli.Flag{asFlag},
				Action: func(c *cli.Context) error {
					return cl.person(c, 2, func(ctx context.Context, s *setup.Setup, bh blobhub.Client, alias string) error {
						state, open := postContext(ctx, bh, alias)
						it, err := threadPost(ctx, bh, alias, c.Args().Get(1))
						if err != nil {
							return err
						}
						res := postResult{Alias: alias, ItemID: it.ID, CreatedAt: it.CreatedAt, Warning: postWarning(alias, state)}
						line := fmt.Sprintf("posted %s to %s", redact.Shown(it.ID), redact.Shown(alias))
						if open != nil {
							res.ReadAs = readAnswer(open, c.Args().Get(1))
							line += "; " + redact.Shown(res.ReadAs.Line)
						}
						if res.Warning != "" {
							cl.warn(res.Warning)
						}
						return cl.result(line, res)
					})
				},
			},
			{
				Name: "show", Usage: "print the thread's state and items (a failed thread: why, and the fix)", ArgsUsage: "<alias>",
				Description: "With --json, one item a line as BlobHub serves it.",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing new items until SIGINT"},
					&cli.DurationFlag{Name: "poll-interval", Value: defaultShowPoll, Usage: "how often --follow asks for new items"},
				},
				Action: func(c *cli.Context) error {
					return cl.person(c, 1, func(ctx context.Context, s *setup.Setup, bh blobhub.Client, alias string) error {
						// ctx ends at the first signal (withSignals), its
						// cause kept for the exit.
						if c.Bool("follow") && cl.human {
							fmt.Fprintf(cl.stderr, "following %s: new items print as they come; Ctrl-C stops\n", redact.Shown(alias))
						}
						return threadShow(ctx, bh, alias, showOptions{JSON: c.Bool("json"), Follow: c.Bool("follow"), Poll: c.Duration("poll-interval"), JobDir: s.JobDir, DefaultAgent: cl.adapters[0].Type}, cl.stdout)
					})
				},
			},
			cl.stateCommand(asFlag, "stop", "stop the thread (instance.state = completed)", "completed", "stops it"),
			cl.stateCommand(asFlag, "retry", "failed → pending (also: an active thread with no local state)", "pending", "activates it"),
		},
	}
}

// stateCommand is thread stop or retry: the person's write of the thread's
// instance.state to state; next says what the next run does with it.
func (cl *cliState) stateCommand(asFlag cli.Flag, name, usage, state, next string) *cli.Command {
	return &cli.Command{
		Name: name, Usage: usage, ArgsUsage: "<alias>",
		Flags: []cli.Flag{asFlag},
		Action: func(c *cli.Context) error {
			return cl.person(c, 1, func(ctx context.Context, s *setup.Setup, bh blobhub.Client, alias string) error {
				from, err := threadSetState(ctx, s, bh, alias, state)
				if err != nil {
					return err
				}
				return cl.result(fmt.Sprintf("thread %s: %s → %s; the next run %s", redact.Shown(alias), redact.Shown(orNone(from)), state, next), stateResult{Alias: alias, From: from, State: state})
			})
		},
	}
}

// postResult is what `thread post --json` prints.
type postResult struct {
	Alias     string `json:"alias"`
	ItemID    string `json:"item_id"`
	CreatedAt string `json:"created_at"`
	// ReadAs is how the next run reads the post as the answer to the
	// thread's waiting question; absent when none waits.
	ReadAs *answerReading `json:"read_as,omitempty"`
	// Warning says no run reads the post (a completed or failed thread).
	Warning string `json:"warning,omitempty"`
}

// stateResult is what `thread stop|retry --json` prints.
type stateResult struct {
	Alias string `json:"alias"`
	From  string `json:"from"`
	State string `json:"state"`
}

// fieldFlags are the flags of the fields a person owns; edit has no
// defaults, so an unset flag leaves its field alone.
func (cl *cliState) fieldFlags(edit bool) []cli.Flag {
	agentFlag := &cli.StringFlag{Name: "agent", Value: cl.adapters[0].Type, Usage: "the agent type: " + cl.agentTypes()}
	perm := "autonomous, guarded or approval (default: the machine's, then approval)"
	if edit {
		agentFlag.Value = ""
		perm = "autonomous, guarded or approval ('': the machine's default)"
	}
	return []cli.Flag{
		&cli.StringFlag{Name: "work-folder", Usage: "absolute path of the checkout the agent works in, on the runner's machine"},
		agentFlag,
		&cli.StringFlag{Name: "permissions", Usage: perm},
		&cli.StringFlag{Name: "model", Usage: "the agent's model (default: the machine's agents.<type>.model)"},
		&cli.StringFlag{Name: "effort", Usage: "the agent's reasoning effort (default: the machine's agents.<type>.effort)"},
		&cli.StringFlag{Name: "executable", Usage: "the agent's executable, one of the machine's agents.<type>.executables"},
		&cli.StringFlag{Name: "policy", Usage: "a YAML or JSON file with the thread's policy (default and rules); a guarded thread needs one"},
		&cli.StringFlag{Name: "artifacts-source", Usage: "the outbox: a subfolder of the work folder whose files are uploaded as artifacts"},
		&cli.StringFlag{Name: "max-cost-usd", Usage: "the thread's budget in US dollars, over all its runs (agent.budget; the machine's agents.<type>.budget caps it; '' or 0: no cap)"},
		&cli.StringFlag{Name: "max-turns", Usage: "the thread's budget in agent turns (model responses), over all its runs ('' or 0: no cap)"},
		&cli.StringFlag{Name: "max-tokens", Usage: "the thread's budget in tokens (input and output), over all its runs ('' or 0: no cap)"},
	}
}

// fieldsOf reads the field flags given: for new every one with a value
// (the work folder and agent always), for edit the ones on the command line.
func fieldsOf(c *cli.Context) fields {
	edit := c.Command.Name == "edit"
	get := func(name string) *string {
		v := c.String(name)
		switch {
		case edit && !c.IsSet(name):
			return nil
		case !edit && v == "" && name != "work-folder" && name != "agent":
			return nil
		}
		return &v
	}
	return fields{WorkFolder: get("work-folder"), Agent: get("agent"), Permissions: get("permissions"), Model: get("model"),
		Effort: get("effort"), Executable: get("executable"), Policy: get("policy"), ArtifactsSource: get("artifacts-source"),
		MaxCostUSD: get("max-cost-usd"), MaxTurns: get("max-turns"), MaxTokens: get("max-tokens")}
}

// person resolves the session and the person's credentials and runs fn.
func (cl *cliState) person(c *cli.Context, nargs int, fn func(context.Context, *setup.Setup, blobhub.Client, string) error) error {
	alias, s, bh, err := cl.open(c, nargs, true)
	if err != nil {
		return err
	}
	if c.Command.Name == "post" || c.Command.Name == "new" {
		if err := checkPoster(c.Context, s, bh, cl.warn); err != nil {
			return err
		}
	}
	return noThreadWhere(fn(c.Context, s, bh, alias), s)
}

func (cl *cliState) warn(msg string) { cl.log.Warn(msg) }

// agentTypes names the agent types of this build for --agent's usage.
func (cl *cliState) agentTypes() string { return strings.Join(cl.runnableTypes(), ", ") }

// runnableTypes are the agent types of this build a thread can use: not
// those known but not supported yet.
func (cl *cliState) runnableTypes() []string {
	var types []string
	for _, a := range cl.adapters {
		if a.Unsupported == "" {
			types = append(types, a.Type)
		}
	}
	return types
}
