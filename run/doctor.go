package run

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/proc"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/confine"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/lock"
	"github.com/blobhub/bhw-run/setup"
)

// Check is one line of `bhw-run doctor`: one thing a scheduled run needs,
// whether it holds, what was found, and what to do when it does not hold.
type Check struct {
	Check  string `json:"check"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	Fix    string `json:"fix"`
}

// DoctorProbe bounds each thing the doctor asks another program: BlobHub,
// an agent's --version, an agent's preflight (the Codex sandbox).
var DoctorProbe = 20 * time.Second

// doctorRetries bounds the doctor's retries of BlobHub: a person waits.
const doctorRetries = 5 * time.Second

// Doctor checks, in order, what a scheduled run of this setup needs,
// without running a thread: the credentials, BlobHub and the key, the
// config, the section and its session, the state tree (writable, private,
// not a running blobhub-worker's), each agent a thread may use (found,
// its version, its preflight) and the agent slots. A check that cannot
// run because an earlier one failed says so and does not hold.
func Doctor(ctx context.Context, o setup.Options) []Check {
	d := &doctor{o: o}
	d.run(ctx)
	return d.checks
}

type doctor struct {
	o      setup.Options
	s      *setup.Setup
	checks []Check
}

func (d *doctor) ok(check, format string, args ...any) {
	d.checks = append(d.checks, Check{Check: check, OK: true, Detail: fmt.Sprintf(format, args...)})
}

func (d *doctor) fail(check, detail, fix string) {
	d.checks = append(d.checks, Check{Check: check, Detail: detail, Fix: fix})
}

// failErr is a failed check whose detail is err (its code first) and
// whose fix is fix, or the "; …" advice err's message ends with.
func (d *doctor) failErr(check string, err error, fix string) {
	ee := exit.Of(err)
	detail := ee.Message
	if i := strings.LastIndex(detail, "; "); i > 0 {
		detail = detail[:i]
		if fix == "" {
			fix = ee.Message[i+2:]
		}
	}
	if ee.Code != "" && ee.Code != exit.CodeInternal {
		detail = ee.Code + ": " + detail
	}
	d.fail(check, detail, fix)
}

// NotChecked starts the detail of a check that could not run because an
// earlier one failed; such a check does not hold either.
const NotChecked = "not checked: "

// skip is a check that could not run.
func (d *doctor) skip(check, why string) {
	d.fail(check, NotChecked+why, "fix the failed check above, then run bhw-run doctor again")
}

func (d *doctor) run(ctx context.Context) {
	s, err := setup.New(d.o)
	if err != nil {
		d.failErr("credentials", err, "")
		return
	}
	d.s = s
	u, err := s.ResolveAPI(d.o)
	d.credentials(err)
	d.workerCredentials()
	if err != nil {
		d.withoutCredentials(ctx)
		return
	}
	if err := s.ResolveStateDir(d.o, u); err != nil {
		d.failErr("state_dir", err, "")
		return
	}
	client := d.api(ctx)
	if err := s.ReadConfig(d.o); err != nil {
		d.failErr("config", err, "fix "+s.ConfigPath+" (contrib/config.example.yaml shows every key)")
		d.skip("section", "the sections are in the config")
		d.stateDir()
		d.blobhubWorker()
		d.skip("agents", "the agents are in the config")
		d.skip("confine", "whether the agents are confined is in the config")
		d.skip("slots", "concurrency.max_agents is in the config")
		return
	}
	d.config()
	d.section(ctx, client)
	d.stateDir()
	d.blobhubWorker()
	d.agents(ctx)
	d.confine()
	d.slots()
}

// withoutCredentials checks what does not need them: the config, the
// agents and their confinement. The config's folder is the profile's state tree, so it is known
// only when --config, --state-dir or a profile names it; the agents are
// checked with the defaults otherwise.
func (d *doctor) withoutCredentials(ctx context.Context) {
	const why = "BlobHub and the state tree's name need the credentials"
	s := d.s
	d.skip("api", why)
	located := d.o.ConfigPath != "" || d.o.StateDir != "" || s.Profile != ""
	if d.o.StateDir != "" || s.Profile != "" {
		if err := s.ResolveStateDir(d.o, &url.URL{}); err != nil {
			located = false
		}
	}
	switch {
	case !located:
		d.skip("config", "it lives in the profile's state tree; pass --config or --state-dir to check it now")
		_ = s.DefaultConfig() // for the agents
	default:
		if err := s.ReadConfig(d.o); err != nil {
			d.failErr("config", err, "fix "+s.ConfigPath+" (contrib/config.example.yaml shows every key)")
			d.skip("agents", "the agents are in the config")
			d.skip("confine", "whether the agents are confined is in the config")
			return
		}
		d.config()
	}
	for _, c := range []string{"section", "state_dir", "blobhub_worker"} {
		d.skip(c, why)
	}
	d.agents(ctx)
	d.confine()
	d.skip("slots", why)
}

// credentials: where the key comes from, and the credentials file's mode.
func (d *doctor) credentials(err error) {
	s, path := d.s, setup.CredentialsPath(d.s.Home)
	if err != nil {
		d.failErr("credentials", err, "")
		return
	}
	where := "no credentials file"
	if fi, err := os.Stat(path); err == nil {
		where = fmt.Sprintf("%s, mode %04o", path, fi.Mode().Perm())
	}
	switch {
	case strings.HasPrefix(s.APIURL, "file://"):
		d.ok("credentials", "%s is a local store: it needs no key (%s)", s.APIURL, where)
	case d.o.APIKey != "":
		d.ok("credentials", "the API key comes from --api-key or BLOBHUB_API_KEY (%s)", where)
	default:
		d.ok("credentials", "profile %q of %s", s.Profile, where)
	}
}

// workerCredentials: the Python blobhub-worker's credentials file holds a
// key too; it must be private like ours. Absent, there is nothing to say.
func (d *doctor) workerCredentials() {
	path := setup.V1CredentialsPath(d.s.Home)
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	switch {
	case err != nil:
		d.fail("worker_credentials", fmt.Sprintf("cannot read %s: %v", path, err), "check the file's owner and mode")
	case fi.Mode().Perm()&0o077 != 0:
		d.fail("worker_credentials", fmt.Sprintf("%s: %s has mode %04o: other users can read its key", exit.CodeInsecureCredentials, path, fi.Mode().Perm()), "chmod 600 "+path)
	default:
		d.ok("worker_credentials", "%s, mode %04o", path, fi.Mode().Perm())
	}
}

// api: BlobHub answers GET /users/me with this key, and the user is the
// one this state tree recorded. A file:// store needs neither.
func (d *doctor) api(ctx context.Context) blobhub.Client {
	s := d.s
	c, err := blobhub.New(blobhub.Config{APIURL: s.APIURL, APIKey: s.APIKey, UserID: blobhub.DefaultLocalUserID,
		Timeout: DoctorProbe, RetryBudget: doctorRetries})
	if err != nil {
		d.fail("api", err.Error(), "fix --api-url or BLOBHUB_API_URL")
		return nil
	}
	if strings.HasPrefix(s.APIURL, "file://") {
		d.ok("api", "%s is a local store: nothing to reach, no key to check", s.APIURL)
		return c
	}
	ctx, cancel := context.WithTimeout(ctx, DoctorProbe)
	defer cancel()
	me, err := c.Me(ctx)
	if err != nil {
		fix := "check the network, a proxy, and --api-url (" + setup.ShownURL(s.APIURL) + ")"
		if errors.Is(err, blobhub.ErrAuth) {
			fix = "check the key: BLOBHUB_API_KEY, --api-key or the profile in " + setup.CredentialsPath(s.Home) + " (a revoked key needs a new one)"
		}
		d.failErr("api", blobhub.AsExit(err, "users/me"), fix)
		return nil
	}
	if rec, err := setup.LoadIdentity(s.StateDir); err == nil && rec != nil && rec.UserID != "" && rec.UserID != me.UserID {
		d.fail("api", fmt.Sprintf("%s: the key belongs to %s but this state tree (%s) was recorded for %s", exit.CodeUserIdentityMismatch, me.UserID, s.StateDir, rec.UserID),
			"use the profile of "+rec.UserID+", or another --state-dir for this key")
		return c
	}
	who := me.UserID
	if me.Name != "" {
		who += " (" + me.Name + ")"
	}
	d.ok("api", "%s answers; the key belongs to %s", setup.ShownURL(s.APIURL), who)
	return c
}

// config: the file parses and every key is known.
func (d *doctor) config() {
	s := d.s
	if _, err := os.Stat(s.ConfigPath); errors.Is(err, fs.ErrNotExist) {
		d.ok("config", "no %s: the defaults apply (contrib/config.example.yaml shows every key)", s.ConfigPath)
		return
	}
	var agents []string
	for _, ad := range s.Adapters {
		if s.Config.Agents[ad.Type] != nil {
			agents = append(agents, ad.Type)
		}
	}
	if len(agents) == 0 {
		agents = []string{"none"}
	}
	d.ok("config", "%s parses: %d section(s), agents %s, max_agents %d", s.ConfigPath, len(s.Config.Sections), strings.Join(agents, ", "), s.Config.Concurrency.MaxAgents)
	d.configWorkerKeys()
}

// section: a section (or --revision/--session) names the session, and
// the session exists.
func (d *doctor) section(ctx context.Context, client blobhub.Client) {
	s := d.s
	if err := s.ResolveSection(d.o, ""); err != nil {
		fix := ""
		if strings.HasPrefix(s.APIURL, "file://") {
			fix = "pass --revision and --session (or BHW_REVISION_ID/BHW_SESSION_ID): the local store makes the session with its first thread, so any ids will do, e.g. rev_local and ses_local"
		}
		d.failErr("section", err, fix)
		return
	}
	sec := s.Section.Session
	what := fmt.Sprintf("section %q: revision %s, session %s", s.Section.Name, sec.RevisionID, sec.SessionID)
	if p := s.Section.Prefix(); p != "" {
		what += ", prefix " + p
	}
	if client == nil {
		d.skip("section", what+"; BlobHub did not answer, so whether the session exists is unknown")
		return
	}
	c, err := blobhub.New(blobhub.Config{APIURL: s.APIURL, APIKey: s.APIKey, RevisionID: sec.RevisionID, SessionID: sec.SessionID,
		UserID: blobhub.DefaultLocalUserID, Timeout: DoctorProbe, RetryBudget: doctorRetries})
	if err != nil {
		d.fail("section", what+": "+err.Error(), "fix the section's ids")
		return
	}
	ctx, cancel := context.WithTimeout(ctx, DoctorProbe)
	defer cancel()
	aliases, err := c.List(ctx)
	switch {
	case errors.Is(err, blobhub.ErrNotFound) && strings.HasPrefix(s.APIURL, "file://"):
		d.ok("section", "%s (the local store creates the session with its first thread: bhw-run thread new)", what)
	case errors.Is(err, blobhub.ErrNotFound):
		d.fail("section", fmt.Sprintf("%s: %s was not found on BlobHub", exit.CodeSessionNotFound, what), "check the section's revision_id and session_id (or --revision/--session)")
	case err != nil:
		d.failErr("section", blobhub.AsExit(err, "list_session_objects"), "")
	default:
		d.ok("section", "%s: %d object(s)", what, len(aliases))
	}
}

// stateDir: the state tree exists (it is made here when it does not, as a
// run would), is a folder of ours, private (0700) and writable.
func (d *doctor) stateDir() {
	dir := d.s.StateDir
	made := ""
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			d.fail("state_dir", fmt.Sprintf("%s: cannot create %s: %v", exit.CodeStateTreeInvalid, dir, err), "create it, or pass another --state-dir")
			return
		}
		made = " (created now)"
	}
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		d.fail("state_dir", fmt.Sprintf("%s: %s is not a folder (%v)", exit.CodeStateTreeInvalid, dir, err), "remove it, or pass another --state-dir")
		return
	}
	// The state tree a run would refuse (another user's, or writable by
	// others) is refused here with the run's own code and message.
	if err := setup.TrustedDir(dir, fi); err != nil {
		d.failErr("state_dir", err, "")
		return
	}
	// Every problem at once: one fix after another would take as many runs.
	var problems, fixes []string
	if f, err := os.CreateTemp(dir, ".doctor-*"); err != nil {
		problems = append(problems, fmt.Sprintf("is not writable (%v)", err))
		fixes = append(fixes, "chmod u+w "+dir)
	} else {
		f.Close()
		os.Remove(f.Name())
	}
	if perm := fi.Mode().Perm(); perm != 0o700 {
		problems = append(problems, fmt.Sprintf("has mode %04o, not 0700 (other users could read or change the threads' records)", perm))
		fixes = append(fixes, "chmod 700 "+dir)
	}
	if len(problems) > 0 {
		d.fail("state_dir", fmt.Sprintf("%s: %s %s", exit.CodeStateTreeInvalid, dir, strings.Join(problems, ", ")),
			strings.Join(fixes, " && ")+" (or pass another --state-dir)")
		return
	}
	d.ok("state_dir", "%s%s, mode 0700, writable", dir, made)
}

// blobhubWorker: no blobhub-worker runs on this state tree. Both would
// run the same threads from the same records, each unaware of the other.
func (d *doctor) blobhubWorker() {
	dir := d.s.StateDir
	running, detail := setup.WorkerRunning(filepath.Join(dir, "instance.yaml"))
	if running {
		d.fail("blobhub_worker", detail+" on this state tree", "stop that blobhub-worker, or give bhw-run a state tree of its own (--state-dir or another profile)")
		return
	}
	msg := "no blobhub-worker runs on " + dir
	if detail != "" {
		msg += " (" + detail + ")"
	}
	// The v1 daemon's own tree is ~/.blobhub-worker itself: a live one
	// there does not share our records, but it works its sessions too.
	if root := filepath.Join(d.s.Home, ".blobhub-worker"); root != dir {
		if live, other := setup.WorkerRunning(filepath.Join(root, "instance.yaml")); live {
			msg += "; " + other + " with its own tree " + root + ": give it other sessions or session_prefixes than bhw-run's"
		}
	}
	d.ok("blobhub_worker", "%s", msg)
}

// confinement:  whether the agents this config
// confines can be confined on this kernel.
func (d *doctor) confine() {
	s := d.s
	on := s.Config.Confine.Mode != "off"
	for _, ac := range s.Config.Agents {
		on = on || (ac != nil && ac.Confine == "on")
	}
	if !on {
		d.ok("confine", "off in %s: the agents run unconfined (docs/security.md)", s.ConfigPath)
		return
	}
	if fix, err := confineCheck(s); err != nil {
		d.fail("confine", exit.CodeConfinementUnavailable+": "+err.Error(), fix)
		return
	}
	net := "the network left alone"
	if p := s.Config.Confine.Ports; len(p) > 0 {
		net = fmt.Sprintf("TCP connects only to ports %v", p)
	}
	abi := confine.ABI()
	d.ok("confine", "Landlock ABI %d in force: the agents run confined, %s, %s (docs/security.md)", abi, confine.Scopes(abi), net)
}

// agentsToCheck are the agent types a thread of this setup may use: those
// config.yaml configures, else the one `thread new` hands off to.
func (d *doctor) agentsToCheck() []*agent.Adapter {
	var out []*agent.Adapter
	for i := range d.s.Adapters {
		if d.s.Config.Agents[d.s.Adapters[i].Type] != nil {
			out = append(out, &d.s.Adapters[i])
		}
	}
	if len(out) == 0 && len(d.s.Adapters) > 0 {
		out = append(out, &d.s.Adapters[0])
	}
	return out
}

// agents: each agent's executable is found (as a run resolves it) and
// tells its version; then its preflight (the Codex sandbox) passes. Each
// is checked through the launch a thread that asks nothing of its own
// gets (typeLaunch).
func (d *doctor) agents(ctx context.Context) {
	r := &Runner{Setup: d.s, Logger: slog.New(slog.DiscardHandler)}
	for _, ad := range d.agentsToCheck() {
		name := "agent " + ad.Type
		l, exe, err := r.typeLaunch(ad)
		if err != nil {
			d.fail(name, fmt.Sprintf("%s: the %s executable %q is not found or not executable: %v", exit.CodeAgentNotInstalled, ad.Type, exe, err),
				fmt.Sprintf("install the %s CLI (README: Set up), or set agents.%s.executable to its absolute path", ad.Type, ad.Type))
			d.login(l)
			if ad.Preflight != nil {
				d.skip(name+" preflight", "the executable was not found")
			}
			continue
		}
		if version, err := d.probeVersion(ctx, r, l); err != nil {
			d.fail(name, fmt.Sprintf("%s was found but does not tell its version: %v", l.Executable, err), "run "+l.Executable+" --version yourself; reinstall it if it fails")
		} else {
			d.ok(name, "%s: %s", l.Executable, version)
		}
		d.login(l)
		d.model(ctx, l)
		if ad.Preflight == nil {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, DoctorProbe)
		err = l.preflight(pctx)
		cancel()
		if err != nil {
			var te *agent.Error
			detail := err.Error()
			if errors.As(err, &te) {
				detail = te.Code + ": " + te.Message
			}
			d.fail(name+" preflight", detail, fmt.Sprintf("fix what it says, or run %s threads autonomous (policy.allow_autonomous) where that is acceptable", ad.Type))
			continue
		}
		d.ok(name+" preflight", "passes for %s threads", l.Permissions)
	}
}

// login: the agent has a way to log in on this machine (a key in the
// environment a run gives it, or a login file in its home), as its
// adapter tells without asking the model; the fix is what a run that
// ends AGENT_AUTH_FAILED would say.
func (d *doctor) login(l *launch) {
	if l.adapter.LoginCheck == nil {
		return
	}
	name := "agent " + l.Type + " login"
	ok, detail := l.adapter.LoginCheck(l.Agent)
	if !ok {
		d.fail(name, fmt.Sprintf("%s: %s", exit.CodeAgentAuthFailed, detail), l.loginFix())
		return
	}
	d.ok(name, "%s", detail)
}

// model is each local model of the agent's environment: it accepts a
// connection, dialled as a run's start dials it (modelChecks).
func (d *doctor) model(ctx context.Context, l *launch) {
	for _, m := range modelChecks(ctx, l) {
		name := "agent " + l.Type + " model"
		if m.Err != nil {
			d.fail(name, fmt.Sprintf("%s: %s (%s) cannot be reached: %s", exit.CodeModelUnreachable, m.URL, m.Var, m.Said), m.Fix)
			continue
		}
		d.ok(name, "%s (%s) accepts connections", m.URL, m.Var)
	}
}

// probeVersion asks l's agent for its version (agentVersion) the way a
// run starts it: confined, unless the machine owner turned that off, in
// an empty work folder of its own, since the executable (or its #!
// interpreter) may be one an agent could rewrite. An agent that must be
// confined and cannot be is not started.
func (d *doctor) probeVersion(ctx context.Context, r *Runner, l *launch) (string, error) {
	if !l.Confined {
		return agentVersion(ctx, l.adapter, l.Agent)
	}
	if err := r.checkConfine(l); err != nil {
		return "", fmt.Errorf("not started: it cannot be confined on this machine (the confine line says why)")
	}
	work, err := os.MkdirTemp("", "bhw-doctor-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	al, _, done, err := r.startLaunch(l, work)
	if err != nil {
		return "", err
	}
	defer done()
	return agentVersion(ctx, l.adapter, al)
}

// agentVersion asks the agent for its version: the adapter's Version, or
// the first line `executable --version` prints, bounded by DoctorProbe;
// confined to l.Confine when set.
func agentVersion(ctx context.Context, ad *agent.Adapter, l agent.Launch) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, DoctorProbe)
	defer cancel()
	if ad.Version != nil {
		return ad.Version(ctx, l)
	}
	v, err := proc.VersionLine(ctx, proc.Config{Path: l.Executable, Dir: l.WorkFolder, Env: l.Env, Confine: l.Confine})
	if errors.Is(err, context.DeadlineExceeded) {
		return "", fmt.Errorf("--version did not answer within %v", DoctorProbe)
	}
	return v, err
}

// slots: how many of the state tree's agent slots are held right now.
func (d *doctor) slots() {
	dir, max := filepath.Join(d.s.StateDir, "slots"), d.s.Config.Concurrency.MaxAgents
	held, err := lock.HeldSlots(dir, max)
	switch {
	case err != nil:
		d.fail("slots", fmt.Sprintf("%s: cannot probe the agent slots in %s: %v", exit.CodeStateTreeInvalid, dir, err), "check the state tree's slots/ folder")
	case held >= max:
		d.fail("slots", fmt.Sprintf("all %d agent slots (concurrency.max_agents) are held right now", max),
			"wait for the running agents to finish (runs wait with --slot-wait, or exit 75 NO_AGENT_SLOT); raise concurrency.max_agents if this lasts")
	default:
		d.ok("slots", "%d of %d agent slots (concurrency.max_agents) held right now", held, max)
	}
}
