package run

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/policy"
)

// Explanation is `bhw-run policy explain`'s answer; --json prints it.
type Explanation struct {
	Alias      string          `json:"alias"`
	Posture    string          `json:"posture"`
	WorkFolder string          `json:"work_folder"`
	Call       string          `json:"call"`
	Decision   policy.Decision `json:"decision"`
	// Lines are the steps of the decision, as Text prints them.
	Lines []string `json:"lines"`
}

// Text is the explanation for a person.
func (e *Explanation) Text() string {
	return fmt.Sprintf("thread %s (%s, work folder %s)\n", e.Alias, e.Posture, e.WorkFolder) + strings.Join(e.Lines, "\n") + "\n"
}

// Explain says which rule decides a described call on the thread alias and
// why, running the same code as the gate. The call is described as the
// thread's agent would ask for it (its tool names). It reads the envelope
// and writes nothing.
func (r *Runner) Explain(ctx context.Context, alias, effect, command, path string) (*Explanation, error) {
	switch effect {
	case policy.EffectRead, policy.EffectWrite, policy.EffectExec, policy.EffectNetwork, "":
	default:
		return nil, exit.Usagef("--effect %q: use read, write, exec or network", effect)
	}
	if effect == "" {
		effect = policy.EffectExec
		if path != "" {
			effect = policy.EffectWrite
		}
	}
	_, env, err := DownloadJob(ctx, r.Client, alias)
	if err != nil {
		return nil, err
	}
	perm, gate, err := r.threadGate(env)
	var te *agent.Error
	if errors.As(err, &te) {
		// For a command that only reads the thread, settings that would
		// fail it are a configuration error, under the thread's own code.
		return nil, &exit.Error{Exit: exit.Config, Code: te.Code, Message: te.Message, Err: te}
	}
	var t policy.Target
	switch effect {
	case policy.EffectExec:
		t.Command = command
	case policy.EffectNetwork:
		t.URL = command
	default:
		t.Paths = []string{path}
	}
	c := policy.Call{Tool: effect, Effect: effect, Target: t, Kind: policy.KindApproval}
	if ad := r.Setup.Adapter(env.Agent.Type); ad != nil && ad.Describe != nil {
		c = ad.Describe(effect, t)
	}
	d, lines := policy.ExplainLines(gate, c)
	return &Explanation{Alias: alias, Posture: perm, WorkFolder: env.WorkFolder, Call: c.Describe(), Decision: d, Lines: lines}, nil
}
