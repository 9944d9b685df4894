package run

import (
	"fmt"
	"slices"
	"strings"

	"github.com/blobhub/bhw-run/agent"
)

// The agents a run can start are the adapters main lists (Options.Adapters):
// run knows each one only by its descriptor, never by name.

// adapter is the descriptor of agent type t, or nil.
func (s *Setup) adapter(t string) *agent.Adapter {
	for i := range s.Adapters {
		if s.Adapters[i].Type == t {
			return &s.Adapters[i]
		}
	}
	return nil
}

// agentTypes lists the known types for a message: "claude_code or codex".
func (s *Setup) agentTypes() string {
	var types []string
	for _, a := range s.Adapters {
		types = append(types, a.Type)
	}
	if len(types) <= 1 {
		return strings.Join(types, "")
	}
	return strings.Join(types[:len(types)-1], ", ") + " or " + types[len(types)-1]
}

// agentConfig is agents.<t> of config.yaml (empty when absent).
func (s *Setup) agentConfig(t string) *AgentConfig {
	if ac := s.Config.Agents[t]; ac != nil {
		return ac
	}
	return &AgentConfig{}
}

// homeKey is the key under agents.<type> that names the adapter's home.
func homeKey(a *agent.Adapter) string {
	if a.HomeKey != "" {
		return a.HomeKey
	}
	return "home"
}

// checkAdapters refuses a list run cannot use: a type twice, or a
// descriptor without a type, an executable or a Start.
func checkAdapters(list []agent.Adapter) error {
	var seen []string
	for i, a := range list {
		switch {
		case a.Type == "" || a.Executable == "" || a.Start == nil:
			return fmt.Errorf("adapter %d (%q) lacks a type, an executable or a Start", i, a.Type)
		case slices.Contains(seen, a.Type):
			return fmt.Errorf("two adapters for agent type %q", a.Type)
		}
		seen = append(seen, a.Type)
	}
	return nil
}
