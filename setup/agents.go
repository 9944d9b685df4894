package setup

import (
	"fmt"
	"slices"
	"strings"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/envelope"
)

// The agents a run can start are the adapters main lists (Options.Adapters):
// setup and run know each one only by its descriptor, never by name.

// Postures.
const (
	PermAutonomous = "autonomous"
	PermGuarded    = "guarded"
	PermApproval   = "approval"
)

// adapter is the descriptor of agent type t, or nil.
func (s *Setup) Adapter(t string) *agent.Adapter {
	for i := range s.Adapters {
		if s.Adapters[i].Type == t {
			return &s.Adapters[i]
		}
	}
	return nil
}

// agentTypes lists the types this build can run, for a message:
// "claude_code or codex".
func (s *Setup) AgentTypes() string {
	var types []string
	for _, a := range s.Adapters {
		if a.Unsupported == "" {
			types = append(types, a.Type)
		}
	}
	if len(types) <= 1 {
		return strings.Join(types, "")
	}
	return strings.Join(types[:len(types)-1], ", ") + " or " + types[len(types)-1]
}

// agentConfig is agents.<t> of config.yaml (empty when absent).
func (s *Setup) AgentConfig(t string) *AgentConfig {
	if ac := s.Config.Agents[t]; ac != nil {
		return ac
	}
	return &AgentConfig{}
}

// HomeKey is the key under agents.<type> that names the adapter's home.
func HomeKey(a *agent.Adapter) string {
	if a.HomeKey != "" {
		return a.HomeKey
	}
	return "home"
}

// checkAdapters refuses a list run cannot use: a type twice, or a
// descriptor without a type, or one it could run without an executable or
// a Start.
func checkAdapters(list []agent.Adapter) error {
	var seen []string
	for i, a := range list {
		switch {
		case a.Type == "":
			return fmt.Errorf("adapter %d lacks a type", i)
		case a.Unsupported == "" && (a.Executable == "" || a.Start == nil):
			return fmt.Errorf("adapter %d (%q) lacks a type, an executable or a Start", i, a.Type)
		case slices.Contains(seen, a.Type):
			return fmt.Errorf("two adapters for agent type %q", a.Type)
		}
		seen = append(seen, a.Type)
	}
	return nil
}

// threadBudget is the thread's agent.budget under the machine's ceiling
// for its agent type (agents.<type>.budget), which a thread can only lower.
func (s *Setup) ThreadBudget(env *envelope.Envelope, agentType string) envelope.Budget {
	b := env.Agent.Budget
	if ac := s.Config.Agents[agentType]; ac != nil {
		b = b.Lower(ac.Budget)
	}
	return b
}
