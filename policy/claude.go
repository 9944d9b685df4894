package policy

import (
	"encoding/json"
	"path/filepath"
	"slices"

	"github.com/bmatcuk/doublestar/v4"
)

// claudeEffects classifies Claude Code's tools. A name missing
// here has no effect: only the thread's default answers it.
var claudeEffects = map[string]string{
	"Read": EffectRead, "Glob": EffectRead, "Grep": EffectRead, "LS": EffectRead, "NotebookRead": EffectRead,

	"Write": EffectWrite, "Edit": EffectWrite, "MultiEdit": EffectWrite, "NotebookEdit": EffectWrite,

	"Bash": EffectExec, "BashOutput": EffectExec, "KillShell": EffectExec, "KillBash": EffectExec,
	"PowerShell": EffectExec, "Monitor": EffectExec, "CronCreate": EffectExec, "CronDelete": EffectExec,
	"Skill": EffectExec, "Workflow": EffectExec,

	"WebFetch": EffectNetwork, "WebSearch": EffectNetwork,
}

// claudeNoEffect are the tools Claude Code 2.1.332 (and a few earlier
// versions) lists that act on nothing the gate can judge: subagents, plan
// mode, worktrees, questions, messaging, tool search.
var claudeNoEffect = []string{
	"Task", "Agent", "AskUserQuestion", "CronList", "EnterPlanMode", "EnterWorktree", "ExitPlanMode",
	"ExitWorktree", "ListAgents", "ReportFindings", "ScheduleWakeup", "SendMessage", "TaskStop",
	"ToolSearch", "TodoWrite", "TaskCreate", "TaskGet", "TaskList", "TaskUpdate",
}

// KnownClaudeTools is every Claude Code tool name this package has looked at:
// the classified ones and the known no-effect ones, sorted. A test checks
// that each tool in the pinned version's system/init.tools is here.
var KnownClaudeTools = func() []string {
	var names []string
	for n := range claudeEffects {
		names = append(names, n)
	}
	names = append(names, claudeNoEffect...)
	slices.Sort(names)
	return slices.Compact(names)
}()

// ClaudeEffect is the effect of a Claude Code tool: read, write, exec, network,
// or "" (no effect) for every other tool, MCP tools (mcp__…) included.
func ClaudeEffect(tool string) string {
	return claudeEffects[tool]
}

// claudeInput holds the input fields that name a target, across tools.
type claudeInput struct {
	FilePath     string `json:"file_path"`
	NotebookPath string `json:"notebook_path"`
	Path         string `json:"path"`
	Pattern      string `json:"pattern"`
	Command      string `json:"command"`
	URL          string `json:"url"`
	Query        string `json:"query"`
}

// ClaudeTarget is what a Claude Code call acts on. Read and write tools give
// their path (file_path, notebook_path or path; for Glob also the fixed base
// of its pattern); exec tools their command line; WebFetch its URL and
// WebSearch its query (both in Target.URL). Relative paths stay relative: the
// gate resolves them against the call's cwd, else the work folder.
func ClaudeTarget(tool string, input json.RawMessage) Target {
	var in claudeInput
	// Fields of another type (a tool we do not know well) are left empty
	// rather than failing: the effect still decides which rules apply.
	_ = json.Unmarshal(input, &in)
	var t Target
	switch ClaudeEffect(tool) {
	case EffectRead, EffectWrite:
		for _, p := range []string{in.FilePath, in.NotebookPath, in.Path} {
			if p != "" {
				t.Paths = append(t.Paths, p)
			}
		}
		if tool == "Glob" && in.Pattern != "" {
			base, _ := doublestar.SplitPattern(filepath.ToSlash(in.Pattern))
			switch {
			case filepath.IsAbs(in.Pattern):
				t.Paths = append(t.Paths, base)
			case base != "." && base != "":
				if in.Path != "" {
					base = filepath.Join(in.Path, base)
				}
				t.Paths = append(t.Paths, base)
			}
		}
	case EffectExec:
		t.Command = in.Command
	case EffectNetwork:
		t.URL = in.URL
		if t.URL == "" {
			t.URL = in.Query
		}
	}
	return t
}

// claudeDescriptive are input fields that only describe a call to a person;
// they may change when the model re-issues the same call, which must still
// match its grant.
var claudeDescriptive = map[string][]string{
	"Bash":       {"description"},
	"PowerShell": {"description"},
}

// ClaudeFingerprint is the one-shot grant fingerprint of a Claude Code call:
// the canonical JSON of {tool, input} without the tool's descriptive fields.
// Ids (tool_use_id, request_id) are never part of it.
func ClaudeFingerprint(tool string, input json.RawMessage) string {
	var in any
	if len(input) > 0 {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(input, &m); err == nil && m != nil {
			for _, f := range claudeDescriptive[tool] {
				delete(m, f)
			}
			in = m
		} else if json.Valid(input) {
			in = input
		} else {
			in = string(input)
		}
	}
	return Fingerprint(map[string]any{"tool": tool, "input": in})
}

// ClaudeQuestions reads the questions of an AskUserQuestion input.
func ClaudeQuestions(input json.RawMessage) ([]Question, error) {
	var in struct {
		Questions []Question `json:"questions"`
	}
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, err
	}
	return in.Questions, nil
}
