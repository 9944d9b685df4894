package acptest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/blobhub/bhw-run/agent/agenttest"
)

// Agent is one pinned ACP agent as the tests drive it: where its CLI is,
// which fake model it talks to, and the tool names and arguments its model
// calls (what the <<tool …>> markers of a scripted prompt name).
type Agent struct {
	Type    string // the envelope's agent.type
	Version string // pinned in the Makefile
	// BinEnv names the variable make test sets to the pinned CLI; PinnedRel
	// is its path under the module root otherwise.
	BinEnv, PinnedRel string
	// Gemini: it talks to the Gemini API fake (else chat completions).
	Gemini bool
	// WriteTool/ShellTool are the model's tool names; WriteArgs/ShellArgs
	// the arguments that write path with content and run command.
	WriteTool, ShellTool string
	WriteArgs            func(path, content string) map[string]any
	ShellArgs            func(command string) map[string]any
}

// The four pinned agents.
var (
	Gemini = &Agent{Type: "gemini", Version: "0.61.0",
		BinEnv: "BHW_GEMINI_BIN", PinnedRel: ".tools/node_modules/@google/gemini-cli/bundle/gemini.js", Gemini: true,
		WriteTool: "write_file", ShellTool: "run_shell_command",
		WriteArgs: func(p, c string) map[string]any { return map[string]any{"file_path": p, "content": c} },
		ShellArgs: func(c string) map[string]any { return map[string]any{"command": c, "description": "probe"} },
	}
	Qwen = &Agent{Type: "qwen_code", Version: "0.24.4",
		BinEnv: "BHW_QWEN_BIN", PinnedRel: ".tools/node_modules/@qwen-code/qwen-code/cli-entry.js",
		WriteTool: "write_file", ShellTool: "run_shell_command",
		WriteArgs: func(p, c string) map[string]any { return map[string]any{"file_path": p, "content": c} },
		ShellArgs: func(c string) map[string]any { return map[string]any{"command": c, "description": "probe"} },
	}
	OpenCode = &Agent{Type: "opencode", Version: "1.18.33",
		BinEnv: "BHW_OPENCODE_BIN", PinnedRel: ".tools/node_modules/opencode-linux-x64/bin/opencode",
		WriteTool: "write", ShellTool: "bash",
		WriteArgs: func(p, c string) map[string]any { return map[string]any{"filePath": p, "content": c} },
		ShellArgs: func(c string) map[string]any { return map[string]any{"command": c, "description": "probe"} },
	}
	Copilot = &Agent{Type: "copilot", Version: "1.0.102",
		BinEnv: "BHW_COPILOT_BIN", PinnedRel: ".tools/node_modules/@github/copilot-linux-x64/copilot",
		WriteTool: "create", ShellTool: "bash",
		WriteArgs: func(p, c string) map[string]any { return map[string]any{"path": p, "file_text": c} },
		ShellArgs: func(c string) map[string]any { return map[string]any{"command": c, "description": "probe command"} },
	}
	Agents = []*Agent{Gemini, Qwen, OpenCode, Copilot}
)

// Write is the script marker that makes the model write path with content.
func (a *Agent) Write(path, content string) string {
	return Marker(a.WriteTool, a.WriteArgs(path, content))
}

// Shell is the script marker that makes the model run command.
func (a *Agent) Shell(command string) string { return Marker(a.ShellTool, a.ShellArgs(command)) }

// Marker is the script marker that makes the fake model call tool with
// args.
func Marker(tool string, args any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(args)
	return "<<tool " + tool + " " + strings.TrimSpace(b.String()) + ">>"
}

// Bin is the agent's pinned CLI: $BinEnv, or the module's .tools. A
// missing one fails the test: make test installs it, and no test skips.
func (a *Agent) Bin(t testing.TB) string {
	t.Helper()
	return agenttest.PinnedCLI(t, a.Type+" CLI "+a.Version, a.BinEnv, a.PinnedRel)
}

var (
	cacheOnce sync.Once
	cacheDir  string
	cacheErr  string
)

// CopilotCache is the XDG cache the Copilot tests share: Copilot unpacks a
// 235 MB runtime there on its first start. make tools fills
// $BHW_COPILOT_CACHE; without it, one dir for this test binary is warmed
// once by `copilot --version`, before any test runs an agent in it.
func CopilotCache(t testing.TB, bin string) string {
	cacheOnce.Do(func() {
		if d := os.Getenv("BHW_COPILOT_CACHE"); d != "" {
			cacheDir = d
		} else {
			d, err := os.MkdirTemp("", "bhw-copilot-cache-")
			if err != nil {
				cacheErr = err.Error()
				return
			}
			cacheDir = d
		}
		cmd := exec.Command(bin, "--version")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + cacheDir, "XDG_CACHE_HOME=" + cacheDir}
		if out, err := cmd.CombinedOutput(); err != nil {
			cacheErr = "copilot --version: " + err.Error() + ": " + string(out)
		}
	})
	if cacheErr != "" {
		t.Fatal(cacheErr)
	}
	return cacheDir
}

// Fake is a scripted model server, whichever API it speaks.
type Fake interface {
	// BaseURL is what the agent is pointed at.
	BaseURL() string
	Requests() []Request
	ModelRequests() []Request
	Inject(Fault)
	ClearFaults()
	RequireKey(key string, status int)
	WaitFor(ctx context.Context, ok func(Request) bool) (Request, error)
}

// BaseURL is the URL Gemini CLI is pointed at (GOOGLE_GEMINI_BASE_URL).
func (s *GeminiServer) BaseURL() string { return s.URL }

// BaseURL is the URL an OpenAI-compatible client is pointed at.
func (s *ChatServer) BaseURL() string { return s.URL }

// NewFake starts the fake model the agent talks to; it is closed at test
// cleanup.
func (a *Agent) NewFake(t testing.TB) Fake {
	if a.Gemini {
		return NewGeminiServer(t)
	}
	return NewChatServer(t)
}

// FakeKey is the API key the agents are given for the fakes.
const FakeKey = "fake-key"

// Setup is how a machine owner points one agent at a model: its model,
// the variables for bhw-run's environment (they pass the allowlist by the
// agent's own prefixes) and its own keys under agents.<type>.
type Setup struct {
	Model string
	Env   map[string]string
	Own   map[string]any
}

// Setup points the agent at the fake model at url.
func (a *Agent) Setup(t testing.TB, url string) Setup {
	t.Helper()
	cache := ""
	if a == Copilot {
		cache = CopilotCache(t, a.Bin(t))
	}
	return a.SetupWith(url, cache)
}

// SetupWith points the agent at the fake model at url, outside a test;
// copilotCache is Copilot's shared runtime cache (cache_dir).
func (a *Agent) SetupWith(url, copilotCache string) Setup {
	switch a {
	case Gemini:
		// The model is the preset's default, gemini-2.5-flash.
		return Setup{Env: map[string]string{"GEMINI_API_KEY": FakeKey, "GOOGLE_GEMINI_BASE_URL": url}}
	case Qwen:
		return Setup{Model: "fake-model", Env: map[string]string{"OPENAI_API_KEY": FakeKey, "OPENAI_BASE_URL": url}}
	case OpenCode:
		return Setup{Model: "fake/fake-model", Env: map[string]string{"OPENAI_API_KEY": FakeKey},
			Own: map[string]any{"provider": map[string]any{"fake": map[string]any{
				"npm":  "@ai-sdk/openai-compatible",
				"name": "Fake",
				// The key by name: it is not in the config text.
				"options": map[string]any{"baseURL": url, "apiKey": "{env:OPENAI_API_KEY}"},
				"models": map[string]any{"fake-model": map[string]any{"name": "Fake Model", "tool_call": true,
					"limit": map[string]any{"context": 100000, "output": 4096}}},
			}}}}
	case Copilot:
		s := Setup{Model: "gpt-4.1",
			Env: map[string]string{"COPILOT_PROVIDER_BASE_URL": url, "COPILOT_PROVIDER_API_KEY": FakeKey}}
		if copilotCache != "" {
			s.Own = map[string]any{"cache_dir": copilotCache}
		}
		return s
	}
	panic("acptest: no setup for " + a.Type)
}

// StartFake starts the fake model the agent talks to, outside a test; the
// caller closes it.
func (a *Agent) StartFake() (Fake, func()) {
	if a.Gemini {
		s := StartGeminiServer()
		return s, s.Close
	}
	s := StartChatServer()
	return s, s.Close
}

// ByType is the pinned agent of agent type typ, or nil.
func ByType(typ string) *Agent {
	for _, a := range Agents {
		if a.Type == typ {
			return a
		}
	}
	return nil
}
