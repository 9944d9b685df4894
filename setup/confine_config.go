package setup

import (
	"path/filepath"

	"github.com/blobhub/bhw-run/exit"
)

// ConfineConfig is config.yaml's confine block: the kernel boundary around
// every agent (docs/security.md). Only the machine owner sets it; nothing
// of a thread can.
type ConfineConfig struct {
	// Mode is on (the default) or off, for every agent type whose
	// agents.<type>.confine does not say otherwise.
	Mode string `yaml:"mode,omitempty"`
	// Writable are more folders and files every confined agent may write
	// (a package cache, say).
	Writable []string `yaml:"writable,omitempty"`
	// Deny are more paths no confined agent may read.
	Deny []string `yaml:"deny,omitempty"`
	// Ports, when set, are the only TCP ports a confined agent may connect
	// to (Landlock ABI 4, Linux 6.7); unset leaves the network alone.
	Ports []uint16 `yaml:"ports,omitempty"`
}

// validateConfine checks the confine block and every agents.<type>.confine.
func validateConfine(c *Config) error {
	if err := confineMode("confine.mode", c.Confine.Mode); err != nil {
		return err
	}
	for name, a := range c.Agents {
		if a != nil {
			if err := confineMode("agents."+name+".confine", a.Confine); err != nil {
				return err
			}
		}
	}
	for key, paths := range map[string][]string{"confine.writable": c.Confine.Writable, "confine.deny": c.Confine.Deny} {
		for _, p := range paths {
			if !filepath.IsAbs(p) {
				return exit.Errorf(exit.CodeInvalidConfig, "%s: %q is not an absolute path", key, p)
			}
		}
	}
	for _, p := range c.Confine.Ports {
		if p == 0 {
			return exit.Errorf(exit.CodeInvalidConfig, "confine.ports: 0 is not a port; list the TCP ports the agents connect to, e.g. [443]")
		}
	}
	return nil
}

func confineMode(key, v string) error {
	switch v {
	case "", "on", "off":
		return nil
	}
	return exit.Errorf(exit.CodeInvalidConfig, "%s %q: use on or off", key, v)
}
