package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	"github.com/blobhub/bhw-run/claude/claudetest"
)

// serveEnv is what Claude Code needs to talk to the stand-in model instead
// of Anthropic's API, in the order printed: the endpoint, a key it accepts
// (any), and no calls beyond the model (telemetry, updates), which would
// wait on a network that may not be there.
func serveEnv(url string) string {
	return "export ANTHROPIC_BASE_URL=" + url + " ANTHROPIC_API_KEY=stand-in CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"
}

// workDirLine is how Claude Code's system prompt names the folder it runs
// in (inside the request's JSON, so the path ends at an escaped newline or
// a quote).
var workDirLine = regexp.MustCompile(`Primary working directory: ([^"\\]+)`)

// standIn answers any turn of the README's by-hand walkthrough: it asks to
// write README.md in the agent's working folder; when a person approved
// that call, it asks again (the run lets it through once); when the write's
// result comes back, it is done. It keeps no state, so it serves any number
// of threads and runs.
func standIn(req claudetest.Request) claudetest.Reply {
	last := req.LastUserText()
	if !strings.Contains(last, "A person approved your call") && hasToolResult(req) {
		return claudetest.Reply{Text: "I added README.md; it says hello. Done."}
	}
	path := "README.md"
	if m := workDirLine.FindSubmatch(req.Body); m != nil {
		path = filepath.Join(string(m[1]), path)
	}
	return claudetest.Reply{Text: "I will add README.md.", Tools: []claudetest.ToolUse{{
		Name: "Write", Input: map[string]any{"file_path": path, "content": "hello\n"}}}}
}

// hasToolResult reports whether the last user message carries a tool's
// result.
func hasToolResult(req claudetest.Request) bool {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			return strings.Contains(string(req.Messages[i].Content), `"tool_result"`)
		}
	}
	return false
}

// serve keeps the stand-in model up for the walkthrough a person types by
// hand (README, "Try it"): it prints the exports that point Claude Code at
// it, then waits for Ctrl-C.
func serve() error {
	model := claudetest.StartModelServer()
	defer model.Close()
	model.Then(standIn)
	fmt.Printf(`A scripted stand-in for the model is up on %s until Ctrl-C.
It does not think: whatever the message, it asks to write README.md saying hello in the
thread's work folder, writes it once a person approves, then says it is done.

Paste this line into the terminal you run bhw-run in:

%s
`, model.URL, serveEnv(model.URL))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	fmt.Printf("\nstopped; the stand-in got %d requests\n", len(model.Requests()))
	return nil
}
