package run

import (
	"cmp"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/outbox"
	"github.com/blobhub/bhw-run/policy"
	"github.com/blobhub/bhw-run/setup"
)

// resolved is the agent launch resolved per field: envelope agent.* →
// agents.<type>.* → built-in default (configured, then the checklist). The
// thread's launch (launch.go) is built from it once.
type resolved struct {
	envelope.Resolved
	Type      string
	adapter   *agent.Adapter
	ExtraArgs []string
	Env       map[string]string
	Options   any // the adapter's options (agents.<type>, decoded)
	Policy    policy.Policy
	// WorkFolder is the work folder the checklist approved, its links
	// resolved: the agent is started there, never in a path a link could
	// turn elsewhere after the check.
	WorkFolder string
	// Confined: the agent runs inside the confinement (confine.go).
	Confined bool
}

// checklist validates a thread before it is activated or resumed, in a
// fixed order where the first failure wins (docs/run.md). An *agent.Error
// fails the thread; an *exit.Error (AGENT_NOT_INSTALLED) leaves it as it is.
// fixed, when set, holds the values fixed at activation (work folder, type,
// executable, homes); threadDir is the thread's folder. It returns the
// thread's launch.
func (r *Runner) checklist(ctx context.Context, env *envelope.Envelope, fixed *envelope.Thread, threadDir string) (*launch, error) {
	wf, pinned := env.WorkFolder, ""
	agentType := env.Agent.Type
	if fixed != nil && fixed.Workspace.WorkFolder != "" {
		wf, agentType = fixed.Workspace.WorkFolder, fixed.Workspace.AgentType
		pinned = fixed.Workspace.ResolvedFolder
	}
	// 1. The work folder.
	real, err := r.checkWorkFolder(env, wf, pinned)
	if err != nil {
		return nil, err
	}
	// 2. The agent type.
	ad, err := checkAgentType(r.Setup, env, agentType, fixed != nil)
	if err != nil {
		return nil, err
	}
	if ad.Unsupported != "" {
		return nil, agent.Errorf(exit.CodeAgentTypeUnsupported, "agent.type %q: %s; use %s", agentType, ad.Unsupported, r.Setup.AgentTypes())
	}
	ac := r.Setup.AgentConfig(agentType)
	res := r.configured(ad)
	res.WorkFolder = real
	// 3. Permissions and policy.
	if res.Permissions, res.Policy, err = r.posture(env, ac); err != nil {
		return nil, err
	}
	// 4. The executable, model, effort and homes.
	if err := r.resolveLaunch(res, env, ac, fixed); err != nil {
		return nil, err
	}
	// 5. The outbox source, and the budget's shape.
	if err := checkArtifactsSource(env, real); err != nil {
		return nil, err
	}
	if err := budgetShape(env); err != nil {
		return nil, err
	}
	// 6. The confinement.
	res.Confined = r.confined(res)
	l := r.newLaunch(res, threadDir)
	if err := r.checkConfine(l); err != nil {
		return nil, err
	}
	// 7. The adapter's own preflight (the Codex sandbox).
	if err := l.preflight(ctx); err != nil {
		var te *agent.Error
		if errors.As(err, &te) {
			return nil, te
		}
		return nil, agent.Errorf(agent.CodeAgentSpawnFailed, "the %s check before start failed: %v", agentType, err)
	}
	return l, nil
}

// checkWorkFolder is step 1: an absolute, existing, readable directory,
// allowed on this machine. It returns the folder with symlinks resolved.
// pinned, when set, is the folder resolved at activation: the thread runs
// there again, and a pinned folder that has become a link is refused
// rather than followed.
func (r *Runner) checkWorkFolder(env *envelope.Envelope, wf, pinned string) (string, error) {
	if err := workFolderShape(env, wf); err != nil {
		return "", err
	}
	if pinned != "" {
		wf = pinned
	}
	fi, err := os.Stat(wf)
	if err != nil {
		return "", agent.Errorf(exit.CodeWorkFolderNotFound, "work folder %s does not exist on this machine; check the path or create the checkout", wf)
	}
	if !fi.IsDir() {
		return "", agent.Errorf(exit.CodeWorkFolderNotADir, "work folder %s is not a directory", wf)
	}
	f, err := os.Open(wf)
	if err != nil {
		return "", agent.Errorf(exit.CodeWorkFolderNotReadable, "work folder %s is not readable: %v", wf, err)
	}
	_, err = f.Readdirnames(1)
	f.Close()
	if err != nil && !errors.Is(err, io.EOF) {
		return "", agent.Errorf(exit.CodeWorkFolderNotReadable, "work folder %s is not readable: %v", wf, err)
	}
	real, err := filepath.EvalSymlinks(wf)
	if err != nil {
		return "", agent.Errorf(exit.CodeWorkFolderNotReadable, "work folder %s cannot be resolved: %v", wf, err)
	}
	if pinned != "" && real != pinned {
		return "", agent.Errorf(exit.CodeWorkFolderNotAllowed, "work folder %s, as resolved when the thread was activated, now leads through a link to %s; bhw-run does not follow the agent's folder elsewhere: restore the folder, or hand the thread off again with `bhw-run thread retry`", pinned, real)
	}
	return real, r.workFolderAllowed(real)
}

// workFolderShape is the part of step 1 that holds on every machine: an
// absolute path.
func workFolderShape(env *envelope.Envelope, wf string) error {
	if why := env.Bad["workspace"]; why != "" {
		return agent.Errorf(exit.CodeWorkFolderNotAbsolute, "workspace is %s; set workspace.work_folder to the checkout's absolute path", why)
	}
	if why := env.Bad["workspace.work_folder"]; why != "" {
		return agent.Errorf(exit.CodeWorkFolderNotAbsolute, "workspace.work_folder is %s; set it to the checkout's absolute path", why)
	}
	if !filepath.IsAbs(wf) {
		return agent.Errorf(exit.CodeWorkFolderNotAbsolute, "workspace.work_folder %q is not an absolute path; set it to the checkout's absolute path", wf)
	}
	return nil
}

// checkAgentType is step 2: a type one of this build's adapters runs. The
// envelope's agent block must be well typed unless the type was fixed at
// activation.
func checkAgentType(s *setup.Setup, env *envelope.Envelope, t string, fixed bool) (*agent.Adapter, error) {
	for _, f := range []string{"agent", "agent.type"} {
		if why := env.Bad[f]; why != "" && !fixed {
			return nil, agent.Errorf(exit.CodeAgentTypeUnsupported, "%s is %s; set agent.type to %s", f, why, s.AgentTypes())
		}
	}
	if ad := s.Adapter(t); ad != nil {
		return ad, nil
	}
	return nil, agent.Errorf(exit.CodeAgentTypeUnsupported, "agent.type %q is not supported; use %s", t, s.AgentTypes())
}

// resolveLaunch is step 4: the executable, resolved on bhw-run's PATH
// before the work folder becomes the cwd (so a relative name never runs
// from the repository), the model and effort, and the homes. The values
// fixed at activation win over today's config, so cron, systemd and a shell
// find the same sessions.
func (r *Runner) resolveLaunch(res *resolved, env *envelope.Envelope, ac *setup.AgentConfig, fixed *envelope.Thread) error {
	ad := res.adapter
	base := cmp.Or(ac.Executable, ad.Executable)
	allow := ac.Executables
	if len(allow) == 0 {
		allow = []string{base}
	}
	if err := launchShape(env, res.Type); err != nil {
		return err
	}
	exe := base
	if env.Agent.Executable != "" {
		if !slices.Contains(allow, env.Agent.Executable) {
			return agent.Errorf(exit.CodeExecutableNotAllowed, "agent.executable %q is not in this machine's allowlist (agents.%s.executables); remove it from the thread or ask the machine owner", env.Agent.Executable, res.Type)
		}
		exe = env.Agent.Executable
	}
	if fixed != nil && fixed.Agent.Resolved.Executable != "" {
		exe = fixed.Agent.Resolved.Executable
	}
	abs, err := lookPath(exe)
	if err != nil {
		return exit.Errorf(exit.CodeAgentNotInstalled, "the %s executable %q is not installed on this machine (%v); install it or set agents.%s.executable; the thread stays pending", res.Type, exe, err, res.Type)
	}
	res.Executable = abs
	res.Model = cmp.Or(env.Agent.Model, ac.Model)
	res.Effort = cmp.Or(env.Agent.Effort, ac.Effort)
	if err := launchValues(res.Model, res.Effort); err != nil {
		return err
	}
	// The homes as configured (configured) give way to those fixed at
	// activation.
	if fixed != nil {
		rr := fixed.Agent.Resolved
		res.Home = cmp.Or(rr.Home, res.Home)
		res.AgentHome = cmp.Or(rr.AgentHome, rr.LegacyHome(setup.HomeKey(ad)), res.AgentHome)
	}
	return nil
}

// launchShape is the part of step 4 that holds on every machine: the
// executable, model and effort, when given, are strings. A wrongly typed
// field fails the thread: ignoring it would run the default instead of
// what the thread asked for.
func launchShape(env *envelope.Envelope, agentType string) error {
	if why := env.Bad["agent.executable"]; why != "" {
		return agent.Errorf(exit.CodeExecutableNotAllowed, "agent.executable is %s; name one of this machine's agents.%s.executables as a string, or remove it", why, agentType)
	}
	for _, f := range []string{"agent.model", "agent.effort"} {
		if why := env.Bad[f]; why != "" {
			return agent.Errorf(agent.CodeAgentSpawnFailed, "%s is %s; give it as a string, or remove it for the machine's default", f, why)
		}
	}
	return nil
}

// launchValues checks the model and effort, which become arguments of the
// agent's command line: neither may read as a flag or hold control
// characters.
func launchValues(model, effort string) error {
	for _, f := range []struct{ name, v string }{{"model", model}, {"effort", effort}} {
		if strings.HasPrefix(f.v, "-") || strings.ContainsFunc(f.v, func(c rune) bool { return c < 0x20 || c == 0x7f }) {
			return agent.Errorf(agent.CodeAgentSpawnFailed, "agent.%s %q starts with - or holds control characters; fix the thread", f.name, f.v)
		}
	}
	return nil
}

// checkArtifactsSource is step 5: the outbox a thread asks for lies inside
// its work folder.
func checkArtifactsSource(env *envelope.Envelope, real string) error {
	if err := artifactsShape(env); err != nil || env.Artifacts == nil || env.Artifacts.WorkerForm() {
		// blobhub-worker's form is checked when the outbox is made: a
		// fault there turns publishing off, and the thread runs.
		return err
	}
	if err := outbox.CheckSource(real, env.Artifacts.Source); err != nil {
		return agent.Errorf(exit.CodeArtifactsSourceInvalid, "%v; use a relative subfolder such as .bhw/outbox", err)
	}
	return nil
}

// artifactsShape is the part of step 5 that holds on every machine: a
// clean relative subfolder.
func artifactsShape(env *envelope.Envelope) error {
	if env.Artifacts == nil || env.Artifacts.WorkerForm() {
		return nil
	}
	for _, f := range []string{"artifacts", "artifacts.source"} {
		if why := env.Bad[f]; why != "" {
			return agent.Errorf(exit.CodeArtifactsSourceInvalid, "%s is %s; set artifacts.source to a relative subfolder such as .bhw/outbox", f, why)
		}
	}
	if err := outbox.ValidateSource(env.Artifacts.Source); err != nil {
		return agent.Errorf(exit.CodeArtifactsSourceInvalid, "%v; use a relative subfolder such as .bhw/outbox", err)
	}
	return nil
}

// posture resolves the thread's permissions and policy (the checklist's
// step 3); the gate and `policy explain` both use it.
func (r *Runner) posture(env *envelope.Envelope, ac *setup.AgentConfig) (string, policy.Policy, error) {
	perm := cmp.Or(env.Agent.Permissions, ac.Permissions, setup.PermApproval)
	allow := r.Setup.Config.Policy.AllowAutonomous
	if err := checkPosture(env, perm, &allow); err != nil {
		return "", policy.Policy{}, err
	}
	var pol policy.Policy
	if env.Policy != nil {
		pol = *env.Policy
		if len(pol.Notes) > 0 && r.Logger != nil {
			r.Logger.Warn("the thread's policy is in bhw-run's older spelling, read as blobhub-worker's shape (and written so with the thread's next state): "+strings.Join(pol.Notes, "; "), "see", "docs/configuration.md, Policy")
		}
	}
	// A default left out allows, as the worker reads it; bhw-run's older
	// spelling (which meant ask) was given ask when it was read.
	return perm, pol, nil
}

// checkPosture is step 3 for the posture perm: a known one, allowed here
// (allowAutonomous nil: the machine is not known, as on the person's
// side), and a policy that parses and holds, which a guarded thread needs.
func checkPosture(env *envelope.Envelope, perm string, allowAutonomous *bool) error {
	switch {
	case env.Bad["agent.permissions"] != "":
		return agent.Errorf(exit.CodePermissionsUnsupported, "agent.permissions is %s; use autonomous, guarded or approval", env.Bad["agent.permissions"])
	case !slices.Contains([]string{setup.PermAutonomous, setup.PermGuarded, setup.PermApproval}, perm):
		return agent.Errorf(exit.CodePermissionsUnsupported, "agent.permissions %q is not supported; use autonomous, guarded or approval", perm)
	case perm == setup.PermAutonomous && allowAutonomous != nil && !*allowAutonomous:
		return agent.Errorf(exit.CodeAutonomousForbidden, "this machine does not allow autonomous threads (policy.allow_autonomous is false); use guarded or approval")
	}
	if env.Bad["policy"] != "" {
		return agent.Errorf(exit.CodePolicyInvalid, "the thread's policy does not parse: %s", env.Bad["policy"])
	}
	if env.Policy != nil {
		if err := env.Policy.Validate(); err != nil {
			return agent.Errorf(exit.CodePolicyInvalid, "the thread's policy is invalid: %v", err)
		}
	}
	if perm == setup.PermGuarded && env.Policy == nil {
		return agent.Errorf(exit.CodePolicyMissing, "a guarded thread needs a policy in thread.metadata.policy; add one or use approval")
	}
	return nil
}

// CheckHandOff runs the steps of the checklist that hold on every machine
// over the envelope a person hands off or edits, in the checklist's order:
// an absolute work folder, an agent type of this build, a known posture,
// a policy that parses (a guarded thread needs one), the model and effort,
// the outbox's shape. What depends on the runner's machine (the folder
// exists and is allowed there, autonomous is allowed, the executable) is
// the runner's to check. A failure keeps the checklist's code with exit 64:
// the person's input is wrong and nothing was written.
func CheckHandOff(s *setup.Setup, env *envelope.Envelope) error {
	err := workFolderShape(env, env.WorkFolder)
	if err == nil {
		_, err = checkAgentType(s, env, env.Agent.Type, false)
	}
	if err == nil {
		err = checkPosture(env, cmp.Or(env.Agent.Permissions, setup.PermApproval), nil)
	}
	if err == nil {
		err = launchShape(env, env.Agent.Type)
	}
	if err == nil {
		err = launchValues(env.Agent.Model, env.Agent.Effort)
	}
	if err == nil {
		err = artifactsShape(env)
	}
	if err == nil {
		err = budgetShape(env)
	}
	var te *agent.Error
	if errors.As(err, &te) {
		return &exit.Error{Exit: exit.Usage, Code: te.Code, Message: te.Message, Err: te}
	}
	return err
}

// gate is the gate a turn of this thread runs under.
func (r *Runner) gate(perm string, pol policy.Policy, workFolder, outbox string) policy.Gate {
	return policy.Gate{Posture: perm, Worker: r.Setup.Config.Policy.Rules, Thread: pol, WorkFolder: workFolder, Outbox: outbox}
}

func lookPath(exe string) (string, error) {
	p, err := exec.LookPath(exe)
	if err != nil {
		return "", err
	}
	return filepath.Abs(p)
}

// workFolderAllowed applies the roots and the forbidden folders of the
// checklist's step 1.
func (r *Runner) workFolderAllowed(real string) error {
	roots := r.Setup.Config.Workspace.Roots
	if len(roots) > 0 {
		ok := false
		for _, root := range roots {
			if rr, err := filepath.EvalSymlinks(root); err == nil && policy.Within(rr, real) {
				ok = true
			}
		}
		if !ok {
			return agent.Errorf(exit.CodeWorkFolderNotAllowed, "work folder %s is not under workspace.roots (%s); move the checkout or ask the machine owner", real, strings.Join(roots, ", "))
		}
	}
	forbidden := map[string]string{
		r.Setup.StateDir:                        "the bhw-run state tree",
		filepath.Join(r.Setup.Home, ".blobhub"): "~/.blobhub",
		// Every profile's state tree, not only this run's.
		setup.WorkerTree(r.Setup.Home): "~/.blobhub-worker, every profile's state tree",
	}
	// Every agent's home and folders, whatever the thread's agent: each
	// holds credentials or sessions.
	for _, ad := range r.Setup.Adapters {
		if ad.HomeEnv != "" {
			forbidden[os.Getenv(ad.HomeEnv)] = ad.HomeEnv
		}
		if ac := r.Setup.Config.Agents[ad.Type]; ac != nil && ac.Home != "" {
			forbidden[ac.Home] = "agents." + ad.Type + "." + setup.HomeKey(&ad)
		}
		for _, d := range ad.HomeDirs {
			forbidden[filepath.Join(r.Setup.Home, d)] = "~/" + d
		}
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
		// Inside counts as much as containing: an agent's unasked zone that
		// covers bhw-run's records could forge another thread's state.
		if policy.Within(real, rd) || policy.Within(rd, real) {
			return agent.Errorf(exit.CodeWorkFolderNotAllowed, "work folder %s is, contains or lies inside %s (%s); pick a folder that holds only the checkout, outside it", real, what, rd)
		}
	}
	return nil
}

// policyOutbox is the thread's artifacts outbox, relative to the work
// folder, that an `outside: outbox` rule compares paths with ("" when the
// thread has none: every path is then outside it). The one place that
// reads it from the envelope.
func policyOutbox(env *envelope.Envelope) string {
	if env == nil || env.Artifacts == nil {
		return ""
	}
	return env.Artifacts.Source
}
