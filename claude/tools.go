package claude

// Claude Code's tools as the gate sees them: the effect of each tool, what
// a call acts on, its grant fingerprint and an AskUserQuestion's
// questions. The gate's pure logic (policy) names no agent; this table is
// the Claude adapter's description of its agent's calls.

import (
	"encoding/json"
	"path/filepath"
	"slices"

	"github.com/blobhub/bhw-run/policy"

	"github.com/bmatcuk/doublestar/v4"
)

// toolEffects classifies Claude Code's tools. A name missing
// here has no effect: only the thread's default answers it.
var toolEffects = map[string]string{
	"Read": policy.EffectRead, "Glob": policy.EffectRead, "Grep": policy.EffectRead, "LS": policy.EffectRead, "NotebookRead": policy.EffectRead,

	"Write": policy.EffectWrite, "Edit": policy.EffectWrite, "MultiEdit": policy.EffectWrite, "NotebookEdit": policy.EffectWrite,

	"Bash": policy.EffectExec, "BashOutput": policy.EffectExec, "KillShell": policy.EffectExec, "KillBash": policy.EffectExec,
	"PowerShell": policy.EffectExec, "Monitor": policy.EffectExec, "CronCreate": policy.EffectExec, "CronDelete": policy.EffectExec,
	"Skill": policy.EffectExec, "Workflow": policy.EffectExec,

	"WebFetch": policy.EffectNetwork, "WebSearch": policy.EffectNetwork,
}

// noEffectTools are the tools Claude Code 2.1.332 (and a few earlier
// versions) lists that act on nothing the gate can judge: subagents, plan
// mode, worktrees, questions, messaging, tool search.
var noEffectTools = []string{
	"Task", "Agent", "AskUserQuestion", "CronList", "EnterPlanMode", "EnterWorktree", "ExitPlanMode",
	"ExitWorktree", "ListAgents", "ReportFindings", "ScheduleWakeup", "SendMessage", "TaskStop",
	"ToolSearch", "TodoWrite", "TaskCreate", "TaskGet", "TaskList", "TaskUpdate",
}

// KnownTools is every Claude Code tool name this adapter has looked at:
// the classified ones and the known no-effect ones, sorted. A test checks
// that each tool in the pinned version's system/init.tools is here.
var KnownTools = func() []string {
	var names []string
	for n := range toolEffects {
		names = append(names, n)
	}
	names = append(names, noEffectTools...)
	slices.Sort(names)
	return slices.Compact(names)
}()

// toolEffect is the effect of a Claude Code tool: read, write, exec, network,
// or "" (no effect) for every other tool, MCP tools (mcp__…) included.
func toolEffect(tool string) string {
	return toolEffects[tool]
}

// toolInput holds the input fields that name a target, across tools.
type toolInput struct {
	FilePath     string `json:"file_path"`
	NotebookPath string `json:"notebook_path"`
	Path         string `json:"path"`
	Pattern      string `json:"pattern"`
	Command      string `json:"command"`
	URL          string `json:"url"`
	Query        string `json:"query"`
}

// toolTarget is what a Claude Code call acts on. Read and write tools give
// their path (file_path, notebook_path or path; for Glob also the fixed base
// of its pattern); exec tools their command line; WebFetch its URL and
// WebSearch its query (both in policy.Target.URL). Relative paths stay relative: the
// gate resolves them against the call's cwd, else the work folder.
func toolTarget(tool string, input json.RawMessage) policy.Target {
	var in toolInput
	// Fields of another type (a tool we do not know well) are left empty
	// rather than failing: the effect still decides which rules apply.
	_ = json.Unmarshal(input, &in)
	var t policy.Target
	switch toolEffect(tool) {
	case policy.EffectRead, policy.EffectWrite:
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
	case policy.EffectExec:
		t.Command = in.Command
	case policy.EffectNetwork:
		t.URL = in.URL
		if t.URL == "" {
			t.URL = in.Query
		}
	}
	return t
}

// descriptiveFields are input fields that only describe a call to a person;
// they may change when the model re-issues the same call, which must still
// match its grant.
var descriptiveFields = map[string][]string{
	"Bash":       {"description"},
	"PowerShell": {"description"},
}

// Fingerprint is the one-shot grant fingerprint of a Claude Code call:
// the canonical JSON of {tool, input} without the tool's descriptive fields.
// Ids (tool_use_id, request_id) are never part of it.
func Fingerprint(tool string, input json.RawMessage) string {
	var in any
	if len(input) > 0 {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(input, &m); err == nil && m != nil {
			for _, f := range descriptiveFields[tool] {
				delete(m, f)
			}
			in = m
		} else if json.Valid(input) {
			in = input
		} else {
			in = string(input)
		}
	}
	return policy.Fingerprint(map[string]any{"tool": tool, "input": in})
}

// toolQuestions reads the questions of an AskUserQuestion input.
func toolQuestions(input json.RawMessage) ([]policy.Question, error) {
	var in struct {
		Questions []policy.Question `json:"questions"`
	}
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, err
	}
	return in.Questions, nil
}
