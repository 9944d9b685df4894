package policy

import (
	"fmt"
	"strings"
)

// The one family of descriptions of a call, for everyone who shows one.

// What is what the call acts on, as text: its command (spaces folded), its
// paths, or its URL; "" when it names none.
func (c Call) What() string {
	switch t := c.Target; {
	case t.Command != "":
		return strings.Join(strings.Fields(t.Command), " ")
	case len(t.Paths) > 0:
		return strings.Join(t.Paths, ", ")
	}
	return c.Target.URL
}

// Brief is the one line people see in briefs, prompts and thread.log, e.g.
// "Bash → rm -rf build": the adapter's Summary when it set one.
func (c Call) Brief() string {
	if c.Summary != "" {
		return c.Summary
	}
	if what := c.What(); what != "" {
		return c.Tool + " → " + what
	}
	return c.Tool
}

// Phrase names the call for the model, in a message it reads back:
// Write /abs/x.txt, Bash `rm -rf build`.
func (c Call) Phrase() string {
	switch t := c.Target; {
	case t.Command != "":
		return fmt.Sprintf("%s `%s`", c.Tool, t.Command)
	case len(t.Paths) > 0:
		return c.Tool + " " + strings.Join(t.Paths, ", ")
	case t.URL != "":
		return c.Tool + " " + t.URL
	}
	return c.Tool
}

// Describe is the call as `policy explain` shows it, every part named:
// Bash (exec): command "rm -rf build", cwd "/w".
func (c Call) Describe() string {
	effect := c.Effect
	if effect == "" {
		effect = "no effect"
	}
	var what []string
	if c.Target.Command != "" {
		what = append(what, fmt.Sprintf("command %q", c.Target.Command))
	}
	if len(c.Target.Paths) > 0 {
		what = append(what, "paths "+quoteList(c.Target.Paths))
	}
	if c.Target.URL != "" {
		what = append(what, fmt.Sprintf("url %q", c.Target.URL))
	}
	if c.Target.Cwd != "" {
		what = append(what, fmt.Sprintf("cwd %q", c.Target.Cwd))
	}
	s := effect
	if c.Tool != "" {
		s = c.Tool + " (" + effect + ")"
	}
	if len(what) > 0 {
		s += ": " + strings.Join(what, ", ")
	}
	return s
}

// Summary is the one-line description of a call of tool on t, for an
// adapter to set as Call.Summary: "Bash → rm -rf build", "Write → /abs/x".
func Summary(tool string, t Target) string { return Call{Tool: tool, Target: t}.Brief() }
