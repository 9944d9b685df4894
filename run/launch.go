package run

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/confine"
	"github.com/blobhub/bhw-run/setup"
)

// launch is how a thread's agent starts, built once (newLaunch) and never
// changed after: the agent resolved field by field (resolved), the home it
// keeps its sessions in, its environment and whether it runs confined. The
// checklist's preflight, the model probe, the turn, the agent's start and
// doctor all take the same value. What belongs to one start (the session,
// the budget left, the instructions file, the confinement's rule set and
// private temp folder, made from the state tree as it is then) is added to
// a copy of Agent by whoever starts it (startLaunch, startAgent).
type launch struct {
	resolved
	// ownHome: AgentHome is the thread's own, in its folder
	// (agent.Adapter.ThreadHome, none being configured); it is recorded
	// in thread.yaml with the thread's first turn, not at its activation.
	ownHome bool
	// Agent is what the adapter's Start and Preflight get, without a
	// session: the executable, the work folder, the environment
	// (agentEnv), the model, effort and posture, the extra arguments, the
	// agent's home and options.
	Agent agent.Launch
}

// newLaunch is the launch of res's agent for the thread whose folder is
// threadDir ("" for none: doctor's). An agent that wants a home of its own
// gets one in the thread's folder when none is configured.
func (r *Runner) newLaunch(res *resolved, threadDir string) *launch {
	l := &launch{resolved: *res}
	if l.AgentHome == "" && l.adapter.ThreadHome && threadDir != "" {
		l.AgentHome, l.ownHome = filepath.Join(threadDir, setup.ThreadHomeDir), true
	}
	l.Agent = agent.Launch{
		Executable: l.Executable, WorkFolder: l.WorkFolder, Env: r.agentEnv(&l.resolved),
		Model: l.Model, Effort: l.Effort, Permissions: l.Permissions, ExtraArgs: l.ExtraArgs,
		Home: l.AgentHome, Options: l.Options, Logger: r.Logger, KillGrace: r.grace(),
		CacheDir: filepath.Join(r.Setup.StateDir, "cache"),
	}
	return l
}

// configured is ad's agent as config.yaml alone resolves it
// (agents.<type>.*, else the built-in default), before anything of a
// thread: the checklist starts from it, doctor checks it.
func (r *Runner) configured(ad *agent.Adapter) *resolved {
	ac := r.Setup.AgentConfig(ad.Type)
	res := &resolved{Type: ad.Type, adapter: ad, ExtraArgs: ac.ExtraArgs, Env: ac.Env, Options: ac.Options}
	res.Permissions, res.Model, res.Effort = cmp.Or(ac.Permissions, setup.PermApproval), ac.Model, ac.Effort
	res.Home = r.Setup.Home
	if ad.HomeEnv != "" {
		res.AgentHome = os.Getenv(ad.HomeEnv)
	}
	res.AgentHome = cmp.Or(ac.Home, res.AgentHome)
	return res
}

// preflight runs the adapter's Preflight, if it has one. Its Launch's
// Confine says whether the agent will run confined, not in what: an
// empty rule set (the rules are built for each start, from the state
// tree as it is then).
func (l *launch) preflight(ctx context.Context) error {
	if l.adapter.Preflight == nil {
		return nil
	}
	al := l.Agent
	if l.Confined {
		al.Confine = &confine.Rules{}
	}
	return l.adapter.Preflight(ctx, al)
}

// startLaunch is what the adapter's Start gets for one start of l's agent
// in workFolder, without a session: l.Agent, confined when l's agent runs
// confined (rules: its rule set and a private TMPDIR, made new from the
// state tree as it is now; nil unconfined). done removes the temp folder,
// once every descendant of the agent is gone.
func (r *Runner) startLaunch(l *launch, workFolder string) (al agent.Launch, rules *confine.Rules, done func(), err error) {
	res := l.resolved
	res.WorkFolder = workFolder
	rules, temp, done, err := r.confinement(&res)
	if err != nil {
		return agent.Launch{}, nil, nil, err
	}
	al = l.Agent
	al.WorkFolder = workFolder
	if rules != nil {
		al.Confine, al.Env = rules, setEnv(al.Env, "TMPDIR", temp)
	}
	return al, rules, done, nil
}

// loginFix is how a person fixes the agent's login or key on this
// machine: its adapter's Login for the agent's home, else a generic hint.
func (l *launch) loginFix() string {
	if l.adapter.Login != nil {
		return l.adapter.Login(l.AgentHome)
	}
	return fmt.Sprintf("log %s in on this machine", l.Type)
}

// agentEnv builds the agent's environment from an allowlist: the basics
// every program needs, proxies, locale, the adapter's own prefixes and
// agents.<type>.env; never BLOBHUB_*, so the agent never sees bhw-run's key.
func (r *Runner) agentEnv(res *resolved) []string {
	keep := func(k string) bool {
		switch k {
		case "PATH", "HOME", "LANG", "TZ", "TMPDIR", "USER", "LOGNAME", "SHELL", "TERM",
			"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy",
			"DISABLE_TELEMETRY", "DISABLE_AUTOUPDATER", "DISABLE_ERROR_REPORTING", "SSL_CERT_FILE", "SSL_CERT_DIR":
			return true
		}
		if strings.HasPrefix(k, "LC_") {
			return true
		}
		for _, p := range res.adapter.EnvPrefixes {
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
	if res.adapter.HomeEnv != "" && res.AgentHome != "" {
		m[res.adapter.HomeEnv] = res.AgentHome
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
