package run

import (
	"fmt"
	"path/filepath"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/policy"
)

// policyRuleReportMax caps the rules a policy_applied item lists, as the
// worker caps it: counts carry the true totals and truncated says so.
const policyRuleReportMax = 100

// policyAppliedItem is the policy_applied item in blobhub-worker's shape,
// {rules: [{id, origin, action}], default, counts, truncated?}, each rule
// with bhw-run's fields beside (its effect, command, outside, index).
func policyAppliedItem(g policy.Gate) agent.Item {
	inForce := g.RulesInForce()
	var rules []map[string]any
	for _, m := range inForce {
		if len(rules) == policyRuleReportMax {
			break
		}
		r := map[string]any{"id": m.Rule.ID, "origin": string(m.Source), "action": m.Rule.EffectiveAction(),
			"effect": m.Rule.Effect, "index": m.Index}
		if len(m.Rule.Command) > 0 {
			r["command"] = m.Rule.Command
		}
		if m.Rule.Outside != "" {
			r["outside"] = m.Rule.Outside
		}
		rules = append(rules, r)
	}
	def := g.Thread.DefaultDecision()
	meta := map[string]any{
		"type": agent.ItemPolicyApplied, "rules": rules, "default": def,
		"counts": map[string]int{"rules": len(inForce), "reported": len(rules)},
	}
	brief := fmt.Sprintf("Policy in force: %d rule(s), default %s", len(inForce), def)
	if len(rules) < len(inForce) {
		meta["truncated"] = true
		brief += fmt.Sprintf(" (listing the first %d)", len(rules))
	}
	if g.Thread.Alias != "" {
		meta["alias"] = g.Thread.Alias
	}
	return agent.Item{Brief: brief, Meta: meta}
}

// policyDeniedItem is the policy_denied item in blobhub-worker's shape,
// {rule: <id>, effect, detail} (rule "" when the thread's default denied),
// with bhw-run's fields beside: origin, the rule's index, the call, why.
func policyDeniedItem(c policy.Call, d policy.Decision) agent.Item {
	detail := c.Target.Command
	if detail == "" && len(c.Target.Paths) > 0 {
		detail = c.Target.Paths[0]
	}
	if detail == "" {
		detail = c.Tool
	}
	meta := map[string]any{"type": agent.ItemPolicyDenied, "rule": "", "effect": c.Effect, "detail": detail,
		"origin": policy.OriginDefault, "call": agent.CallMeta(c), "reason": d.Reason}
	brief := fmt.Sprintf("⛔ %s %s denied by the thread's default", c.Effect, c.What())
	if d.By != nil {
		meta["rule"], meta["origin"], meta["index"] = d.By.Rule.ID, string(d.By.Source), d.By.Index
		brief = fmt.Sprintf("⛔ %s %s denied by %s rule %s", c.Effect, c.What(), d.By.Source, d.By.Rule.Label(d.By.Index))
	}
	return agent.Item{Brief: brief, Meta: meta}
}

// outboxRulesUnusable says why the thread's outbox cannot be used when a
// rule in force says outside: outbox, "" otherwise.
func outboxRulesUnusable(g policy.Gate) string {
	for _, m := range g.RulesInForce() {
		if m.Rule.Outside == policy.OutsideOutbox {
			work, err := filepath.EvalSymlinks(g.WorkFolder)
			if err != nil {
				work = g.WorkFolder
			}
			_, why := policy.ResolveOutbox(work, g.Outbox)
			return why
		}
	}
	return ""
}
