package cli

// The mistakes a person makes handing off a thread, and what they most
// likely meant: a near agent type, the absolute path of a relative work
// folder, a ~ the shell left alone, a first message without --message, a
// posture this machine refuses, a guarded thread without a policy.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/redact"
	"github.com/blobhub/bhw-run/setup"
)

// policyExample is a guarded thread's policy small enough for one line of
// an error; contrib/policy.example.yaml is a fuller one.
const policyExample = `{rules: [{id: tests, effect: exec, action: allow, command: ["go test *"]}], default: ask}`

// handOffRefused is refused(err) for `thread new` and `thread edit`, with
// what the person most likely meant.
func (cl *cliState) handOffRefused(err error, f fields) error {
	err = refused(err)
	var ee *exit.Error
	if !errors.As(err, &ee) || ee.Exit != exit.Usage {
		return err
	}
	hint := ""
	switch ee.Code {
	case exit.CodeAgentTypeUnsupported:
		if f.Agent != nil {
			if meant := agentMeant(*f.Agent, cl.runnableTypes()); meant != "" {
				hint = fmt.Sprintf("did you mean --agent %s?", meant)
			}
		}
	case exit.CodeWorkFolderNotAbsolute:
		if f.WorkFolder != nil {
			hint = absoluteMeant(*f.WorkFolder)
		}
	case exit.CodePolicyMissing:
		return &exit.Error{Exit: ee.Exit, Code: ee.Code, Err: ee.Err, Message: "a guarded thread needs a policy: pass --policy FILE, a YAML file of rules and a default such as " +
			policyExample + " (contrib/policy.example.yaml is a fuller one to start from; docs/gate.md says how rules are judged), or use --permissions approval"}
	}
	if hint == "" {
		return err
	}
	return &exit.Error{Exit: ee.Exit, Code: ee.Code, Message: ee.Message + "; " + hint, Err: ee.Err}
}

// agentMeant is the agent type a mistyped one stands for: the same but for
// case and - or space for _ (claude-code, Claude_Code), the one it is the
// start of or starts with (claude, gemini-cli), or one a typo away; "" when
// none is clear.
func agentMeant(given string, types []string) string {
	norm := strings.NewReplacer("-", "_", " ", "_").Replace(strings.ToLower(strings.TrimSpace(given)))
	var prefixed []string
	for _, t := range types {
		if norm == t {
			return t
		}
		if len(norm) >= 3 && (strings.HasPrefix(t, norm) || strings.HasPrefix(norm, t+"_")) {
			prefixed = append(prefixed, t)
		}
	}
	if len(prefixed) == 1 {
		return prefixed[0]
	}
	return nearest(norm, types)
}

// absoluteMeant offers the absolute path of a relative work folder: from
// the current folder, or from HOME for a ~ the shell did not expand (it
// expands one only at the start of a word, so not in --work-folder=~/x).
func absoluteMeant(wf string) string {
	if wf == "~" || strings.HasPrefix(wf, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return "the shell leaves ~ unexpanded after =: write --work-folder ~/… with a space, or $HOME"
		}
		abs := filepath.Join(home, strings.TrimPrefix(wf, "~"))
		return fmt.Sprintf("the shell leaves ~ unexpanded after =: write --work-folder %s (a space, not =), or --work-folder %s", wf, shellQuote(abs))
	}
	abs, err := filepath.Abs(wf)
	if err != nil || wf == "" {
		return ""
	}
	return fmt.Sprintf("did you mean --work-folder %s?", shellQuote(abs))
}

// argCountError is the usage error of a command given another number of
// arguments than it takes. For `thread new`, the extra ones are most likely
// a message that lost its --message.
func argCountError(c *cli.Context, nargs int) error {
	got := c.Args().Slice()
	if c.Command.Name == "new" && len(got) > nargs { // only thread has new
		msg := strings.Join(got[:len(got)-1], " ")
		return exit.Usagef("thread new takes one <alias>, got %d arguments (%s): the first message goes in --message, as in `bhw-run thread new … --message %s %s`",
			len(got), redact.Shown(strings.Join(got, " ")), shellQuote(msg), shellQuote(got[len(got)-1]))
	}
	return exit.Usagef("%s expects %d argument(s), got %d: %s; put flags before `--`", c.Command.FullName(), nargs, c.NArg(), c.Command.ArgsUsage)
}

// handOffWarnings warns about what a hand-off leaves for later: a posture
// a run on this machine would fail the thread for, and no first message (a
// run finds nothing to do until one is posted).
func handOffWarnings(s *setup.Setup, env *envelope.Envelope, alias, message string, warn func(string)) {
	perm := env.Agent.Permissions
	if perm == "" {
		if ac := s.Config.Agents[env.Agent.Type]; ac != nil {
			perm = ac.Permissions
		}
	}
	if perm == setup.PermAutonomous && !s.Config.Policy.AllowAutonomous {
		warn(fmt.Sprintf("this machine does not allow autonomous threads: a run here fails %s with POLICY_AUTONOMOUS_FORBIDDEN; hand it off guarded or approval (`bhw-run thread edit %s --permissions approval`), or, as the machine's owner, set policy.allow_autonomous: true in %s",
			redact.Shown(alias), shellQuote(alias), redact.Shown(s.ConfigPath)))
	}
	if message == "" {
		warn(fmt.Sprintf("thread %s has no message yet: a run finds nothing to do (idle) until a person posts one", redact.Shown(alias)))
	}
}

// handedOff is what `thread new` says it did and what comes next.
func handedOff(alias, message string) string {
	if message == "" {
		return fmt.Sprintf("thread %s handed off (pending); post what the agent should do with `bhw-run thread post %s '…'`, then run `bhw-run %s`", redact.Shown(alias), redact.Shown(shellQuote(alias)), redact.Shown(shellQuote(alias)))
	}
	return fmt.Sprintf("thread %s handed off (pending); run `bhw-run %s`", redact.Shown(alias), redact.Shown(shellQuote(alias)))
}
