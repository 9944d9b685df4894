package run

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/outbox"
	"github.com/blobhub/bhw-run/policy"
)

// Agent types and postures.
const (
	AgentClaude = "claude_code"
	AgentCodex  = "codex"

	PermAutonomous = "autonomous"
	PermGuarded    = "guarded"
	PermApproval   = "approval"
)

// Thread failure codes of the activation checklist (SPEC §6.3).
const (
	CodeWorkFolderNotAbsolute  = "WORK_FOLDER_NOT_ABSOLUTE"
	CodeWorkFolderNotFound     = "WORK_FOLDER_NOT_FOUND"
	CodeWorkFolderNotADir      = "WORK_FOLDER_NOT_A_DIR"
	CodeWorkFolderNotReadable  = "WORK_FOLDER_NOT_READABLE"
	CodeWorkFolderNotAllowed   = "WORK_FOLDER_NOT_ALLOWED"
	CodeAgentTypeUnsupported   = "AGENT_TYPE_UNSUPPORTED"
	CodePermissionsUnsupported = "PERMISSIONS_UNSUPPORTED"
	CodeAutonomousForbidden    = "AUTONOMOUS_FORBIDDEN"
	CodePolicyMissing          = "POLICY_MISSING"
	CodePolicyInvalid          = "POLICY_INVALID"
	CodeExecutableNotAllowed   = "AGENT_EXECUTABLE_NOT_ALLOWED"
	CodeArtifactsSourceInvalid = "ARTIFACTS_SOURCE_INVALID"
	CodeSandboxUnavailable     = "SANDBOX_UNAVAILABLE"
	CodeTurnTimeout            = "TURN_TIMEOUT"
	CodeAgentStalled           = "AGENT_STALLED"
)

// resolved is the agent launch resolved per field: envelope agent.* →
// agents.<type>.* → built-in default (SPEC §2.2).
type resolved struct {
	envelope.Resolved
	Type      string
	ExtraArgs []string
	Sandbox   string
	Env       map[string]string
	Policy    policy.Policy
}

// SandboxCheck runs the Codex sandbox preflight (SPEC §6.3 step 6); main
// wires codex.SandboxWorks into it.
type SandboxCheck func(ctx context.Context, executable string, env []string) error

// checklist validates a thread before it is activated or resumed (SPEC
// §6.3), in the exact order, first failure wins. A *envelope.Error fails the
// thread; an *ExitError (AGENT_NOT_INSTALLED) leaves it as it is. fixed, when
// set, holds the values fixed at activation (work folder, type, executable).
func (r *Runner) checklist(ctx context.Context, env *envelope.Envelope, fixed *envelope.Thread) (*resolved, error) {
	wf := env.WorkFolder
	agentType := env.Agent.Type
	if fixed != nil && fixed.Workspace.WorkFolder != "" {
		wf, agentType = fixed.Workspace.WorkFolder, fixed.Workspace.AgentType
	}
	// 1. The work folder.
	if env.Bad["workspace.work_folder"] != "" || !filepath.IsAbs(wf) {
		return nil, envelope.Errorf(CodeWorkFolderNotAbsolute, "workspace.work_folder %q is not an absolute path; set it to the checkout's absolute path", wf)
	}
	fi, err := os.Stat(wf)
	if err != nil {
		return nil, envelope.Errorf(CodeWorkFolderNotFound, "work folder %s does not exist on this machine; check the path or create the checkout", wf)
	}
	if !fi.IsDir() {
		return nil, envelope.Errorf(CodeWorkFolderNotADir, "work folder %s is not a directory", wf)
	}
	if f, err := os.Open(wf); err != nil {
		return nil, envelope.Errorf(CodeWorkFolderNotReadable, "work folder %s is not readable: %v", wf, err)
	} else {
		_, err = f.Readdirnames(1)
		f.Close()
		if err != nil && err.Error() != "EOF" {
			return nil, envelope.Errorf(CodeWorkFolderNotReadable, "work folder %s is not readable: %v", wf, err)
		}
	}
	real, err := filepath.EvalSymlinks(wf)
	if err != nil {
		return nil, envelope.Errorf(CodeWorkFolderNotReadable, "work folder %s cannot be resolved: %v", wf, err)
	}
	if err := r.workFolderAllowed(real); err != nil {
		return nil, err
	}
	// 2. The agent type.
	switch agentType {
	case AgentClaude, AgentCodex:
	case "antigravity":
		return nil, envelope.Errorf(CodeAgentTypeUnsupported, "agent type antigravity is not supported yet; use claude_code or codex")
	default:
		return nil, envelope.Errorf(CodeAgentTypeUnsupported, "agent.type %q is not supported; use claude_code or codex", agentType)
	}
	ac := r.agentConfig(agentType)
	res := &resolved{Type: agentType, ExtraArgs: ac.ExtraArgs, Env: ac.Env}
	// 3. Permissions and policy.
	perm, pol, err := r.posture(env, ac)
	if err != nil {
		return nil, err
	}
	res.Permissions, res.Policy = perm, pol
	// 4. The executable, resolved on bhw-run's PATH before the work folder
	// becomes the cwd, so a relative name never runs from the repository.
	def := map[string]string{AgentClaude: "claude", AgentCodex: "codex"}[agentType]
	base := firstNonEmpty(ac.Executable, def)
	allow := ac.Executables
	if len(allow) == 0 {
		allow = []string{base}
	}
	exe := base
	if env.Agent.Executable != "" {
		if !slices.Contains(allow, env.Agent.Executable) {
			return nil, envelope.Errorf(CodeExecutableNotAllowed, "agent.executable %q is not in this machine's allowlist (agents.%s.executables); remove it from the thread or ask the machine owner", env.Agent.Executable, agentType)
		}
		exe = env.Agent.Executable
	}
	if fixed != nil && fixed.Agent.Resolved.Executable != "" {
		exe = fixed.Agent.Resolved.Executable
	}
	abs, err := lookPath(exe)
	if err != nil {
		return nil, exitErr(ExitConfig, CodeAgentNotInstalled, "the %s executable %q is not installed on this machine (%v); install it or set agents.%s.executable; the thread stays pending", agentType, exe, err, agentType)
	}
	res.Executable = abs
	res.Model = firstNonEmpty(env.Agent.Model, ac.Model)
	res.Effort = firstNonEmpty(env.Agent.Effort, ac.Effort)
	for flag, v := range map[string]string{"model": res.Model, "effort": res.Effort} {
		if strings.HasPrefix(v, "-") || strings.ContainsFunc(v, func(c rune) bool { return c < 0x20 || c == 0x7f }) {
			return nil, envelope.Errorf(envelope.CodeAgentSpawnFailed, "agent.%s %q starts with - or holds control characters; fix the thread", flag, v)
		}
	}
	res.Sandbox = firstNonEmpty(ac.Sandbox, "workspace-write")
	res.Home = r.Setup.Home
	res.ConfigDir = firstNonEmpty(ac.ConfigDir, os.Getenv("CLAUDE_CONFIG_DIR"))
	res.CodexHome = firstNonEmpty(ac.CodexHome, os.Getenv("CODEX_HOME"))
	if fixed != nil {
		// The recorded home dirs are reused so cron, systemd and a shell
		// find the same sessions.
		rr := fixed.Agent.Resolved
		res.Home = firstNonEmpty(rr.Home, res.Home)
		res.ConfigDir = firstNonEmpty(rr.ConfigDir, res.ConfigDir)
		res.CodexHome = firstNonEmpty(rr.CodexHome, res.CodexHome)
	}
	// 5. The outbox source.
	if env.Artifacts != nil {
		if env.Bad["artifacts.source"] != "" {
			return nil, envelope.Errorf(CodeArtifactsSourceInvalid, "artifacts.source is not a string; use a relative subfolder such as .bhw/outbox")
		}
		if err := outbox.CheckSource(real, env.Artifacts.Source); err != nil {
			return nil, envelope.Errorf(CodeArtifactsSourceInvalid, "%v; use a relative subfolder such as .bhw/outbox", err)
		}
	}
	// 6. The Codex sandbox, for approval and guarded.
	if agentType == AgentCodex && res.Permissions != PermAutonomous && r.SandboxCheck != nil {
		if err := r.SandboxCheck(ctx, res.Executable, r.agentEnv(res)); err != nil {
			return nil, envelope.Errorf(CodeSandboxUnavailable, "the Codex sandbox does not work on this machine (%v); approval and guarded threads need it", err)
		}
	}
	return res, nil
}

// posture resolves the thread's permissions and policy (SPEC §6.3 step 3);
// the gate and `policy explain` both use it.
func (r *Runner) posture(env *envelope.Envelope, ac AgentConfig) (string, policy.Policy, error) {
	var pol policy.Policy
	perm := firstNonEmpty(env.Agent.Permissions, ac.Permissions, PermApproval)
	switch {
	case env.Bad["agent.permissions"] != "":
		return "", pol, envelope.Errorf(CodePermissionsUnsupported, "agent.permissions is %s; use autonomous, guarded or approval", env.Bad["agent.permissions"])
	case !slices.Contains([]string{PermAutonomous, PermGuarded, PermApproval}, perm):
		return "", pol, envelope.Errorf(CodePermissionsUnsupported, "agent.permissions %q is not supported; use autonomous, guarded or approval", perm)
	case perm == PermAutonomous && !r.Setup.Config.Policy.AllowAutonomous:
		return "", pol, envelope.Errorf(CodeAutonomousForbidden, "this machine does not allow autonomous threads (policy.allow_autonomous is false); use guarded or approval")
	}
	if env.Bad["policy"] != "" {
		return "", pol, envelope.Errorf(CodePolicyInvalid, "the thread's policy does not parse: %s", env.Bad["policy"])
	}
	if env.Policy != nil {
		if err := env.Policy.Validate(); err != nil {
			return "", pol, envelope.Errorf(CodePolicyInvalid, "the thread's policy is invalid: %v", err)
		}
		pol = *env.Policy
	}
	if perm == PermGuarded && env.Policy == nil {
		return "", pol, envelope.Errorf(CodePolicyMissing, "a guarded thread needs a policy in thread.metadata.policy; add one or use approval")
	}
	if pol.Default == "" {
		pol.Default = policy.DecisionAsk
	}
	return perm, pol, nil
}

// gate is the gate a turn of this thread runs under.
func (r *Runner) gate(perm string, pol policy.Policy, workFolder string) policy.Gate {
	return policy.Gate{Posture: perm, Worker: r.Setup.Config.Policy.Rules, Thread: pol, WorkFolder: workFolder}
}

func lookPath(exe string) (string, error) {
	p, err := exec.LookPath(exe)
	if err != nil {
		return "", err
	}
	return filepath.Abs(p)
}

func (r *Runner) agentConfig(t string) AgentConfig {
	if t == AgentCodex {
		return r.Setup.Config.Agents.Codex
	}
	return r.Setup.Config.Agents.ClaudeCode
}

// workFolderAllowed applies the roots and the forbidden folders of §6.3 step 1.
func (r *Runner) workFolderAllowed(real string) error {
	roots := r.Setup.Config.Workspace.Roots
	if len(roots) > 0 {
		ok := false
		for _, root := range roots {
			if rr, err := filepath.EvalSymlinks(root); err == nil && within(rr, real) {
				ok = true
			}
		}
		if !ok {
			return envelope.Errorf(CodeWorkFolderNotAllowed, "work folder %s is not under workspace.roots (%s); move the checkout or ask the machine owner", real, strings.Join(roots, ", "))
		}
	}
	forbidden := map[string]string{
		r.Setup.StateDir:                           "the bhw-run state tree",
		filepath.Join(r.Setup.Home, ".blobhub"):    "~/.blobhub",
		os.Getenv("CLAUDE_CONFIG_DIR"):             "the Claude config dir",
		os.Getenv("CODEX_HOME"):                    "CODEX_HOME",
		r.Setup.Config.Agents.ClaudeCode.ConfigDir: "the Claude config dir",
		r.Setup.Config.Agents.Codex.CodexHome:      "CODEX_HOME",
		filepath.Join(r.Setup.Home, ".claude"):     "~/.claude",
		filepath.Join(r.Setup.Home, ".codex"):      "~/.codex",
	}
	if p, ok := strings.CutPrefix(r.Setup.APIURL, "file://"); ok {
		forbidden[p] = "the local store"
	}
	for dir, what := range forbidden {
		if dir == "" {
			continue
		}
		rd := dir
		if x, err := filepath.EvalSymlinks(dir); err == nil {
			rd = x
		}
		if within(real, rd) {
			return envelope.Errorf(CodeWorkFolderNotAllowed, "work folder %s contains or is %s (%s); pick a folder that holds only the checkout", real, what, rd)
		}
	}
	return nil
}

// within reports whether p is dir or below it.
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}

// agentEnv builds the agent's environment from the allowlist of SPEC §7:
// never BLOBHUB_*.
func (r *Runner) agentEnv(res *resolved) []string {
	keep := func(k string) bool {
		switch k {
		case "PATH", "HOME", "LANG", "TZ", "TMPDIR", "USER", "LOGNAME", "SHELL", "TERM",
			"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy",
			"DISABLE_TELEMETRY", "DISABLE_AUTOUPDATER", "DISABLE_ERROR_REPORTING", "SSL_CERT_FILE", "SSL_CERT_DIR":
			return true
		}
		for _, p := range []string{"LC_", "ANTHROPIC_", "CLAUDE_", "CODEX_", "OPENAI_"} {
			if strings.HasPrefix(k, p) {
				return true
			}
		}
		return false
	}
	m := map[string]string{}
	for _, kv := range r.environ() {
		k, v, _ := strings.Cut(kv, "=")
		if keep(k) && !strings.HasPrefix(k, "BLOBHUB_") {
			m[k] = v
		}
	}
	for k, v := range res.Env {
		if !strings.HasPrefix(k, "BLOBHUB_") {
			m[k] = v
		}
	}
	if res.Home != "" {
		m["HOME"] = res.Home
	}
	if res.ConfigDir != "" {
		m["CLAUDE_CONFIG_DIR"] = res.ConfigDir
	}
	if res.CodexHome != "" {
		m["CODEX_HOME"] = res.CodexHome
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

func (r *Runner) environ() []string {
	if r.Environ != nil {
		return r.Environ
	}
	return os.Environ()
}
