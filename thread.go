package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/run"
)

// threadCommand wires the person's side: thread new|post|show|stop|retry.
func (cl *cliState) threadCommand() *cli.Command {
	asFlag := &cli.StringFlag{Name: "as", Usage: "post with this credentials profile (the person's, not the runner's)"}
	return &cli.Command{
		Name:  "thread",
		Usage: "the person's side: create, post to, show, stop or retry a thread",
		Subcommands: []*cli.Command{
			{
				Name: "new", Usage: "hand off a new thread (state pending)", ArgsUsage: "<alias>",
				Flags: []cli.Flag{asFlag,
					&cli.StringFlag{Name: "work-folder", Usage: "absolute path of the checkout the agent works in"},
					&cli.StringFlag{Name: "agent", Value: adapters[0].Type, Usage: agentTypes()},
					&cli.StringFlag{Name: "permissions", Usage: "autonomous, guarded or approval (default: the machine's, then approval)"},
					&cli.StringFlag{Name: "message", Usage: "the first message to the agent"},
				},
				Action: func(c *cli.Context) error {
					return cl.person(c, 1, func(ctx context.Context, s *run.Setup, bh blobhub.Client, alias string) error {
						o := newOptions{WorkFolder: c.String("work-folder"), Agent: c.String("agent"), Permissions: c.String("permissions"), Message: c.String("message")}
						if err := threadNew(ctx, bh, alias, o); err != nil {
							return err
						}
						fmt.Fprintf(cl.stdout, "thread %s handed off (pending); run `bhw-run %s`\n", shown(alias), shown(alias))
						return nil
					})
				},
			},
			{
				Name: "post", Usage: "post a person's item (also answers a waiting question)", ArgsUsage: "<alias> TEXT",
				Flags: []cli.Flag{asFlag},
				Action: func(c *cli.Context) error {
					return cl.person(c, 2, func(ctx context.Context, s *run.Setup, bh blobhub.Client, alias string) error {
						it, err := threadPost(ctx, bh, alias, c.Args().Get(1))
						if err == nil {
							fmt.Fprintf(cl.stdout, "posted %s to %s\n", shown(it.ID), shown(alias))
						}
						return err
					})
				},
			},
			{
				Name: "show", Usage: "print the thread's state and items", ArgsUsage: "<alias>",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing new items until SIGINT"},
					&cli.DurationFlag{Name: "poll-interval", Value: defaultShowPoll, Usage: "how often --follow asks for new items"},
				},
				Action: func(c *cli.Context) error {
					return cl.person(c, 1, func(ctx context.Context, s *run.Setup, bh blobhub.Client, alias string) error {
						ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
						defer stop()
						return threadShow(ctx, bh, alias, showOptions{JSON: c.Bool("json"), Follow: c.Bool("follow"), Poll: c.Duration("poll-interval")}, cl.stdout)
					})
				},
			},
			{
				Name: "stop", Usage: "stop the thread (instance.state = completed)", ArgsUsage: "<alias>",
				Flags: []cli.Flag{asFlag},
				Action: func(c *cli.Context) error {
					return cl.person(c, 1, func(ctx context.Context, s *run.Setup, bh blobhub.Client, alias string) error {
						from, err := threadSetState(ctx, s, bh, alias, "completed")
						if err == nil {
							fmt.Fprintf(cl.stdout, "thread %s: %s → completed; the next run stops it\n", shown(alias), shown(orNone(from)))
						}
						return err
					})
				},
			},
			{
				Name: "retry", Usage: "failed → pending (also: an active thread with no local state)", ArgsUsage: "<alias>",
				Flags: []cli.Flag{asFlag},
				Action: func(c *cli.Context) error {
					return cl.person(c, 1, func(ctx context.Context, s *run.Setup, bh blobhub.Client, alias string) error {
						from, err := threadSetState(ctx, s, bh, alias, "pending")
						if err == nil {
							fmt.Fprintf(cl.stdout, "thread %s: %s → pending; the next run activates it\n", shown(alias), shown(orNone(from)))
						}
						return err
					})
				},
			},
		},
	}
}

// person resolves the session and the person's credentials and runs fn.
func (cl *cliState) person(c *cli.Context, nargs int, fn func(context.Context, *run.Setup, blobhub.Client, string) error) error {
	alias, s, bh, err := cl.open(c, nargs, true)
	if err != nil {
		return err
	}
	if c.Command.Name == "post" || c.Command.Name == "new" {
		if err := checkPoster(c.Context, s, bh, func(msg string) { cl.log.Warn(msg) }); err != nil {
			return err
		}
	}
	return fn(c.Context, s, bh, alias)
}

// agentTypes names the agent types of this build for --agent's usage.
func agentTypes() string {
	var types []string
	for _, a := range adapters {
		types = append(types, a.Type)
	}
	return strings.Join(types, ", ")
}
