package run

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/confine"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/policy"
	"github.com/blobhub/bhw-run/setup"
)

// The confinement is the kernel boundary around the agent (the confine
// package, docs/security.md): run decides whether a thread's agent gets
// it, and knows what it may and may not touch.

// confined is whether res's agent runs confined: agents.<type>.confine,
// else confine.mode, else on, in every posture.
func (r *Runner) confined(res *resolved) bool {
	return cmp.Or(r.Setup.AgentConfig(res.Type).Confine, r.Setup.Config.Confine.Mode) != "off"
}

// checkConfine is the checklist's step 6: a thread whose agent must be
// confined fails on a kernel that cannot confine it, never runs without.
func (r *Runner) checkConfine(l *launch) error {
	if !l.Confined {
		return nil
	}
	if fix, err := confineCheck(r.Setup); err != nil {
		return agent.Errorf(exit.CodeConfinementUnavailable, "the agent cannot be confined: %v; %s", err, fix)
	}
	return nil
}

// confineFix is what a machine owner does about CONFINEMENT_UNAVAILABLE.
const confineFix = "upgrade the kernel or enable Landlock at boot (or remove confine.ports), or set confine.mode: off (or agents.<type>.confine: off) in config.yaml to run the agents unconfined"

// confinement is the rule set of res's agent and its private temp folder
// (TMPDIR), made new for this start; done removes the folder. nil rules
// when the thread runs unconfined.
func (r *Runner) confinement(res *resolved) (rules *confine.Rules, temp string, done func(), err error) {
	if !res.Confined {
		return nil, "", func() {}, nil
	}
	// Beside bhw-run's own temp files, not in the state tree: a socket
	// path (108 bytes at most) in the agent's TMPDIR must stay short. In
	// one parent for every agent's, which every agent is denied whole
	// but for its own: a folder made there after an agent started is
	// still out of its reach.
	parent, err := agentTempParent()
	if err == nil {
		temp, err = os.MkdirTemp(parent, confineTempPrefix)
	}
	if err != nil {
		return nil, "", nil, agent.Errorf(agent.CodeAgentSpawnFailed, "making the agent's private temp folder: %v; fix TMPDIR (or remove what stands in its place)", err)
	}
	done = func() { _ = os.RemoveAll(temp) }
	homes := r.ownHomes(res)
	// A home must exist to be granted, and on a fresh HOME none does yet
	// (~/.claude, ~/.codex, ~/.config/opencode, …): the confined agent
	// could then make nor save anything there, and a resume after a park
	// would find no session. Each is made private, as the agent would.
	makeHomes(homes)
	spec := confine.Spec{
		WorkFolder: res.WorkFolder, Temp: temp,
		Writable: append(homes, r.Setup.Config.Confine.Writable...),
		Deny:     r.confineDeny(res, temp, homes),
		Ports:    r.Setup.Config.Confine.Ports,
	}
	built, err := confine.Build(spec)
	if err != nil {
		done()
		return nil, "", nil, agent.Errorf(agent.CodeAgentSpawnFailed, "building the agent's confinement: %v", err)
	}
	return &built, temp, done, nil
}

// confinementRefused follows a tool result that says a path was refused
// with a confinement_refused status item for each such path the
// confinement accounts for (confine.Rules.Refused): the agent's own tool
// says only "Permission denied", which reads like the file's own
// permissions. Whether the tool marked its result failed does not count:
// a shell line that goes on after the refusal ends well. rules is the
// rule set the agent runs in, nil when it runs unconfined.
func (a *activation) confinementRefused(rules *confine.Rules, it agent.Item) {
	if rules == nil {
		return
	}
	tool, _ := it.Meta["tool"].(map[string]any)
	out, _ := tool["output"].(string)
	for _, r := range rules.Refused(out) {
		why, access := "bhw-run keeps the agent out of it", "denied"
		if !r.Denied {
			why, access = "the agent may write only its work folder, its home, its temp folder and confine.writable", "read_only"
		}
		a.emit(agent.StatusItem("confinement_refused", fmt.Sprintf("🔒 the confinement refused %s: %s (docs/security.md)", r.Path, why),
			map[string]any{"path": r.Path, "access": access, "invocation_id": toolID(it)}))
	}
}

// confineTempPrefix names the private temp folders in agentTempParent.
const confineTempPrefix = "bhw-agent-"

// claudeMDPrefix names the folders of the private CLAUDE.md copies the
// claude adapter makes in bhw-run's TMPDIR for an unconfined Claude
// thread (a confined one's is in its private temp folder).
const claudeMDPrefix = "bhw-claude-md-"

// agentTempParent is the one folder every agent's private temp folder is
// made in, $TMPDIR/bhw-run-agents-<uid>: made 0700 when missing, and
// refused when it is a link, not a folder, another user's or open to
// group or others (in a shared /tmp another user could have made it
// first).
func agentTempParent() (string, error) {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("bhw-run-agents-%d", os.Geteuid()))
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return "", fmt.Errorf("%s is not a folder (a link or a file stands there)", dir)
	case st != nil && int(st.Uid) != os.Geteuid():
		return "", fmt.Errorf("%s belongs to uid %d, not to uid %d that runs bhw-run", dir, st.Uid, os.Geteuid())
	case fi.Mode().Perm()&0o077 != 0:
		return "", fmt.Errorf("%s has mode %04o; run chmod 700 %s", dir, fi.Mode().Perm(), dir)
	}
	return dir, nil
}

// ownHomes are the agent homes the thread's agent writes: its resolved
// home, else the adapter's folders under the user's home (its default).
func (r *Runner) ownHomes(res *resolved) []string {
	if res.AgentHome != "" {
		return []string{res.AgentHome}
	}
	var out []string
	for _, d := range res.adapter.HomeDirs {
		out = append(out, filepath.Join(res.Home, d))
	}
	return out
}

// makeHomes makes each of the agent's homes that does not exist yet,
// mode 0700 (missing parents too). One that cannot be made is left to
// the agent, which then fails as it would unconfined, saying why.
func makeHomes(homes []string) {
	for _, h := range homes {
		if _, err := os.Lstat(h); errors.Is(err, fs.ErrNotExist) {
			_ = os.MkdirAll(h, 0o700)
		}
	}
}

// confineDeny is what the agent may not read: bhw-run's secrets and
// records, other threads' folders and agent homes, other agents' homes,
// other agents' temp folders, and the machine owner's confine.deny. A
// folder the thread shares with another (the same work folder, one
// inside the other, a shared agent home) stays the thread's.
func (r *Runner) confineDeny(res *resolved, temp string, homes []string) []string {
	s := r.Setup
	// ~/.blobhub-worker whole: every profile's state tree, not only this
	// run's (another profile's config.yaml could turn its confinement off).
	deny := []string{setup.CredentialsPath(s.Home), setup.WorkerTree(s.Home), s.StateDir}
	if p, ok := strings.CutPrefix(s.APIURL, "file://"); ok {
		deny = append(deny, p)
	}
	var others []string
	for _, ad := range s.Adapters {
		if ad.HomeEnv != "" {
			others = append(others, os.Getenv(ad.HomeEnv))
		}
		if ac := s.Config.Agents[ad.Type]; ac != nil {
			others = append(others, ac.Home)
		}
		for _, d := range ad.HomeDirs {
			others = append(others, filepath.Join(s.Home, d))
		}
	}
	others = append(others, otherThreadFolders(s.StateDir)...)
	// Every agent's temp folder, made before or after this start: their
	// parent whole (this agent's own stays writable inside it). And the
	// CLAUDE.md copies of unconfined Claude threads.
	deny = append(deny, filepath.Dir(temp))
	if copies, err := filepath.Glob(filepath.Join(os.TempDir(), claudeMDPrefix+"*")); err == nil {
		others = append(others, copies...)
	}
	own := append([]string{res.WorkFolder, temp}, homes...)
	for _, o := range others {
		if o != "" && filepath.IsAbs(o) && !slices.ContainsFunc(own, func(p string) bool { return policy.Within(p, o) || policy.Within(o, p) }) {
			deny = append(deny, o)
		}
	}
	return append(deny, s.Config.Confine.Deny...)
}

// setEnv is env (sorted K=V) with k set to v.
func setEnv(env []string, k, v string) []string {
	out := slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, k+"=") })
	out = append(out, fmt.Sprintf("%s=%s", k, v))
	slices.Sort(out)
	return out
}
