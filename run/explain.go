package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/policy"
)

// Explain says which rule decides a described call on the thread alias and
// why, running the same code as the gate (SPEC §8.3). It reads the envelope
// and writes nothing.
func (r *Runner) Explain(ctx context.Context, alias, effect, command, path string) (string, error) {
	switch effect {
	case policy.EffectRead, policy.EffectWrite, policy.EffectExec, policy.EffectNetwork, "":
	default:
		return "", exitErr(ExitUsage, "", "--effect %q: use read, write, exec or network", effect)
	}
	if effect == "" {
		effect = policy.EffectExec
		if path != "" {
			effect = policy.EffectWrite
		}
	}
	_, env, err := downloadJob(ctx, r.Client, alias)
	if err != nil {
		return "", err
	}
	perm, pol, err := r.posture(env, r.agentConfig(env.Agent.Type))
	var te *envelope.Error
	if errors.As(err, &te) {
		return "", exitErr(ExitConfig, te.Code, "%s", te.Message)
	}
	c := policy.Call{Effect: effect, Kind: policy.KindApproval}
	switch effect {
	case policy.EffectExec:
		c.Tool, c.Target.Command = "Bash", command
		c.Input, _ = json.Marshal(map[string]string{"command": command})
	case policy.EffectNetwork:
		c.Tool, c.Target.URL = "WebFetch", command
	default:
		c.Tool = map[string]string{policy.EffectRead: "Read", policy.EffectWrite: "Write"}[effect]
		c.Target.Paths = []string{path}
		c.Input, _ = json.Marshal(map[string]string{"file_path": path})
	}
	g := r.gate(perm, pol, env.WorkFolder)
	return fmt.Sprintf("thread %s (%s, work folder %s)\n", alias, perm, env.WorkFolder) + policy.Explain(g, c), nil
}
