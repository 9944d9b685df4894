package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

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
// it and the lines a cron or systemd recipe needs for the same, a line per
// request while it answers, and at Ctrl-C a last line and exit 0. port 0
// picks a free port at each start; another keeps that one, so a crontab's
// lines hold across restarts.
func serve(port int) error {
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	model, err := claudetest.StartModelServerAt(addr)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %v; stop what holds it (another make model?), or pass MODEL_PORT=<a free port>", addr, err)
	}
	defer model.Close()
	var served atomic.Int64
	model.Then(func(req claudetest.Request) claudetest.Reply {
		r := standIn(req)
		what := "says it is done"
		if len(r.Tools) > 0 {
			what = "asks to write README.md"
			if in, ok := r.Tools[0].Input.(map[string]any); ok {
				what = fmt.Sprintf("asks to write %v", in["file_path"])
			}
		}
		fmt.Printf("%s request %d: %s\n", time.Now().Format("15:04:05"), served.Add(1), what)
		return r
	})
	fmt.Printf(`A scripted stand-in for the model is up on %s until Ctrl-C.
It does not think: whatever the message, it asks to write README.md saying hello in the
thread's work folder, writes it once a person approves, then says it is done.

Paste this line into the terminal you run bhw-run in:

%s

%s
Each request it answers is a line below.
`, model.URL, serveEnv(model.URL), scheduleLines(model.URL, port == 0))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	fmt.Printf("\nstopped; the stand-in answered %d requests\n", served.Load())
	return nil
}

// scheduleLines is what a cron or systemd recipe needs for the offline
// try-out: a scheduled run has none of a terminal's exports, so the
// stand-in's and the local store's variables go into the recipe, one
// NAME=value a line, literal (cron expands no $HOME).
func scheduleLines(url string, newPort bool) string {
	home, _ := os.UserHomeDir()
	vars := strings.Fields(strings.TrimPrefix(serveEnv(url), "export "))
	vars = append(vars, "BLOBHUB_API_URL=file://"+filepath.Join(home, "bhw-store"), "BHW_REVISION_ID=rev_local", "BHW_SESSION_ID=ses_local")
	var b strings.Builder
	b.WriteString("Under cron or systemd (README, Run it on a schedule), put these lines above the line of\n" +
		"contrib/cron/bhw-run.crontab (crontab -e), or each as Environment= in bhw-run.service; the last\n" +
		"three are the local store of README step 3 (leave them out with a BlobHub account):\n\n")
	for _, v := range vars {
		b.WriteString(v + "\n")
	}
	if newPort {
		b.WriteString("\nThe port is new at each start: `make model MODEL_PORT=" + url[strings.LastIndex(url, ":")+1:] + "` keeps this one, so the lines hold.\n")
	}
	return b.String()
}
