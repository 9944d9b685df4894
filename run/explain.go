package run

import (
	"context"
	"errors"
	"fmt"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/policy"
)

// Explain says which rule decides a described call on the thread alias and
// why, running the same code as the gate. The call is described as the
// thread's agent would ask for it (its tool names). It reads the envelope
// and writes nothing.
func (r *Runner) Explain(ctx context.Context, alias, effect, command, path string) (string, error) {
	switch effect {
	case policy.EffectRead, policy.EffectWrite, policy.EffectExec, policy.EffectNetwork, "":
	default:
		return "", usageErr("--effect %q: use read, write, exec or network", effect)
	}
	if effect == "" {
		effect = policy.EffectExec
		if path != "" {
			effect = policy.EffectWrite
		}
	}
	_, env, err := DownloadJob(ctx, r.Client, alias)
	if err != nil {
		return "", err
	}
	perm, pol, err := r.posture(env, r.Setup.agentConfig(env.Agent.Type))
	var te *agent.Error
	if errors.As(err, &te) {
		// For a command that only reads the thread, settings that would
		// fail it are a configuration error, under the thread's own code.
		return "", &ExitError{Exit: ExitConfig, Code: te.Code, Message: te.Message, Err: te}
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
	if ad := r.Setup.adapter(env.Agent.Type); ad != nil && ad.Describe != nil {
		c = ad.Describe(effect, t)
	}
	g := r.gate(perm, pol, env.WorkFolder)
	return fmt.Sprintf("thread %s (%s, work folder %s)\n", alias, perm, env.WorkFolder) + policy.Explain(g, c), nil
}
