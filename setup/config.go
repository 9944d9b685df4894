// Package setup turns the command line's Options into a Setup: the
// credentials and the API, the state tree (and whether it may be
// trusted), config.yaml and the agents it configures, the section that
// owns an alias, the identity the key belongs to and the session's worker
// object. Everything it resolves comes before a thread's lock is taken;
// run, the person's commands and the doctor all start from it.
package setup

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/blobhub"
	"github.com/blobhub/bhw-run/envelope"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/policy"
	"github.com/blobhub/bhw-run/redact"
)

// DefaultAPIURL is BlobHub's public API.
const DefaultAPIURL = "https://api.blobhub.io/v1"

// DefaultMaxFiles is artifacts.max_files when config.yaml sets none: the
// most files a turn publishes one by one (run packs the rest).
const DefaultMaxFiles = 100

// JobType is the only job type bhw-run runs.
const JobType = "session_agent_harness"

// Options are the global flags, already merged with their environment
// variables by main (flag > env).
type Options struct {
	Profile, APIURL, APIKey string
	StateDir, ConfigPath    string
	Section                 string
	RevisionID, SessionID   string
	// SectionFrom and SessionFrom say where Section and the session ids
	// came from: FromFlag, FromEnv, or "" for the caller's own (a flag).
	SectionFrom, SessionFrom string
	Home                     string // the user's home (tests override it)
	// Adapters are the agents this build can run (main lists them).
	Adapters []agent.Adapter
	// Version is bhw-run's, from the build (cli passes it); the worker
	// object records it.
	Version string
	// Secrets collects every key Resolve reads; main passes the set its
	// stdout and stderr write through. Nil: Resolve makes one.
	Secrets *redact.Secrets
}

// Config is config.yaml (docs/configuration.md). Unknown keys are
// refused.
type Config struct {
	// Polling is the blobhub-worker daemon's poll cadence
	// (worker/configuration), accepted so the daemon's documented
	// config.yaml loads as it is; a one-shot run polls nothing.
	Polling *struct {
		IntervalIdleMS   int `yaml:"interval_idle_ms"`
		IntervalActiveMS int `yaml:"interval_active_ms"`
		BackoffMaxMS     int `yaml:"backoff_max_ms"`
	} `yaml:"polling"`
	Concurrency struct {
		MaxAgents int `yaml:"max_agents"`
		// HeldWaitsMax is the daemon's cap on agents held waiting for a
		// person; bhw-run parks instead, so it is read and not used.
		HeldWaitsMax *int `yaml:"held_waits_max,omitempty"`
	} `yaml:"concurrency"`
	// Agents is agents.<type>: one block per agent type a listed adapter
	// handles.
	Agents    map[string]*AgentConfig `yaml:"agents"`
	Workspace struct {
		Roots []string `yaml:"roots"`
	} `yaml:"workspace"`
	Policy struct {
		AllowAutonomous bool          `yaml:"allow_autonomous"`
		Rules           []policy.Rule `yaml:"rules"`
	} `yaml:"policy"`
	Artifacts struct {
		MaxBytes int64 `yaml:"max_bytes"`
		// MaxFiles bounds the files a turn publishes one by one; the rest
		// go in one archive (run/outboxbound.go).
		MaxFiles int `yaml:"max_files"`
	} `yaml:"artifacts"`
	// Attachments is the daemon's attachments block: its inbox is the
	// middle tier of a thread's inbox (run/attachments.go). Keys the daemon
	// may add later are kept in Rest, never refused.
	Attachments *struct {
		Inbox string         `yaml:"inbox"`
		Rest  map[string]any `yaml:",inline"`
	} `yaml:"attachments,omitempty"`
	Sections  []Section `yaml:"sections"`
	Discovery Discovery `yaml:"discovery"` // discovery.go
	// Confine is the kernel boundary around the agents (confine_config.go).
	Confine ConfineConfig `yaml:"confine,omitempty"`
}

// AgentConfig is agents.<type> of config.yaml: the keys every agent has,
// and the adapter's own.
type AgentConfig struct {
	Executable  string            `yaml:"executable,omitempty"`
	Executables []string          `yaml:"executables,omitempty"`
	Model       string            `yaml:"model,omitempty"`
	Effort      string            `yaml:"effort,omitempty"`
	Permissions string            `yaml:"permissions,omitempty"`
	ExtraArgs   []string          `yaml:"extra_args,omitempty"`
	Env         map[string]string `yaml:"env,omitempty"`
	// Budget is the machine owner's ceiling on what one thread of this
	// agent type may spend (a thread's agent.budget can only lower it).
	Budget envelope.Budget `yaml:"budget,omitempty"`
	// Confine is on or off for this agent type, over confine.mode.
	Confine string `yaml:"confine,omitempty"`
	// TurnRetries is how many times a turn a transient API error ended
	// is resumed (0 or more; unset: DefaultTurnRetries), as blobhub-worker
	// reads it: from config.yaml only, never from a thread.
	TurnRetries *int `yaml:"turn_retries,omitempty"`
	// Debug and Wait are the daemon's: the agent's debug log, and how a
	// wait for a person is held. Read and checked as the daemon checks
	// them; a one-shot run does not use them (doctor says so).
	Debug bool   `yaml:"debug,omitempty"`
	Wait  string `yaml:"wait,omitempty"`
	// Own holds every other key as written: the home under the adapter's
	// HomeKey (config_dir, codex_home, …) and the adapter's own options.
	Own map[string]any `yaml:",inline"`

	// Home and Options are what Resolve made of Own: the agent's home, and
	// what the adapter's Options returned for the rest.
	Home    string `yaml:"-"`
	Options any    `yaml:"-"`
}

// commonAgentKeys are the keys of agents.<type> every agent has.
var commonAgentKeys = []string{"budget", "confine", "debug", "effort", "env", "executable", "executables", "extra_args", "model", "permissions", "turn_retries", "wait"}

// workerAgentTypes are agent types blobhub-worker documents: in a build
// whose adapters lack one (a test's, say), its agents.<type> block is read
// and checked, not refused.
var workerAgentTypes = []string{"antigravity", "test_double"}

// Section is one configured session a state tree watches.
type Section struct {
	Name          string       `yaml:"name"`
	JobType       string       `yaml:"job_type"`
	Session       SessionTuple `yaml:"session"`
	SessionPrefix string       `yaml:"session_prefix"`
}

// SessionTuple names a BlobHub session.
type SessionTuple struct {
	OrgID         string `yaml:"org_id"`
	BlobID        string `yaml:"blob_id"`
	RevisionID    string `yaml:"revision_id"`
	SessionID     string `yaml:"session_id"`
	SessionPrefix string `yaml:"session_prefix,omitempty"`
}

// Prefix is the namespace the section watches.
func (s Section) Prefix() string {
	if s.SessionPrefix != "" {
		return s.SessionPrefix
	}
	return s.Session.SessionPrefix
}

// Setup is everything resolved before the lock is taken.
type Setup struct {
	Profile   string // "" when none
	APIURL    string
	APIKey    string
	StateName string // the state tree's name under profiles/
	StateDir  string
	// ConfigPath is the config file read, or looked for when there is none.
	ConfigPath string
	Config     Config
	Section    Section
	// SectionWhy says how Section was chosen ("from --section", "the only
	// section of the config", …), for messages.
	SectionWhy string
	JobDir     string // {state}/jobs/{JobID}: session_agent_harness-{session_id}[-{prefix slug}-{8 hex}]
	// alias is the thread the section was chosen for ("" for none): the
	// job folder is named again for it once a session alias is resolved.
	alias string
	Home  string // the user's home
	// Adapters are the agents this build can run, from Options.
	Adapters []agent.Adapter
	// Version is bhw-run's, from Options.
	Version string
	// Secrets are the keys read while resolving (Options.Secrets), redacted
	// from everything the run writes.
	Secrets *redact.Secrets
	// Ignored names the config.yaml blocks the daemon documents that mean
	// nothing to a one-shot run (polling); a run logs them at debug.
	Ignored []string
	// PolicyNotes say how policy.rules in bhw-run's older spelling were
	// read (policy.Migrate); a run logs them as one warning.
	PolicyNotes []string
}

type credentialsFile struct {
	Default  string                       `yaml:"default"`
	Profiles map[string]credentialProfile `yaml:"profiles"`
}

type credentialProfile struct {
	APIKey string `yaml:"api_key"`
	Key    string `yaml:"key"`
	APIURL string `yaml:"api_url"`
	URL    string `yaml:"url"`
}

// CredentialsPath is ~/.blobhub/credentials.yaml, the BlobHub CLI's file.
func CredentialsPath(home string) string {
	return filepath.Join(home, ".blobhub", "credentials.yaml")
}

// V1CredentialsPath is ~/.blobhub-worker/credentials.yaml, the file
// blobhub-worker v1's login writes (worker/filesystem):
//
//	api:
//	  key: bhk_...
//	  url: https://api.blobhub.io/v1
//
// It is read after the BlobHub CLI's file (Resolve), and its key is a
// secret whether it is used or not.
func V1CredentialsPath(home string) string {
	return filepath.Join(home, ".blobhub-worker", "credentials.yaml")
}

// loadCredentials reads the shared credentials file; a missing file is
// empty. Every key in it, of every profile, is added to sec before the file
// is decoded, so not even a decoding error can show one.
func loadCredentials(home string, sec *redact.Secrets) (*credentialsFile, error) {
	var c credentialsFile
	if err := readCredentials(CredentialsPath(home), &c, sec); err != nil {
		return nil, err
	}
	return &c, nil
}

type v1Credentials struct {
	API struct {
		Key string `yaml:"key"`
		URL string `yaml:"url"`
	} `yaml:"api"`
}

// readCredentials decodes a credentials file into v, its keys added to sec
// first; a missing file leaves v as it is. Group or other permission bits
// are refused, as the BlobHub CLI and the daemon refuse them.
func readCredentials(path string, v any, sec *redact.Secrets) error {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return exit.Errorf(exit.CodeInvalidConfig, "cannot read %s: %v", path, err)
	}
	if !fi.Mode().IsRegular() {
		// A named pipe would block the read before any signal is handled.
		return exit.Errorf(exit.CodeInvalidConfig, "%s is not a regular file (%s); replace it with the file itself", path, fi.Mode().Type())
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return exit.Errorf(exit.CodeInsecureCredentials,
			"%s has mode %04o; run chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return exit.Errorf(exit.CodeInvalidConfig, "cannot read %s: %v", path, err)
	}
	sec.Add(credentialKeys(b)...)
	if err := envelope.DecodeYAML(b, v, false); err != nil {
		return exit.Errorf(exit.CodeInvalidConfig, "%s %v", path, err)
	}
	return nil
}

// credentialKeys are the values of every key, api_key or *_key entry of a
// credentials file, at any depth and whatever the file's shape.
func credentialKeys(b []byte) []string {
	var doc any
	if yaml.Unmarshal(b, &doc) != nil {
		return nil
	}
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if s, ok := e.(string); ok && (k == "key" || k == "api_key" || strings.HasSuffix(k, "_key")) {
					out = append(out, s)
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(doc)
	return out
}

// v1Keys are the keys of the v1 credentials file, when bhw-run can read it.
func v1Keys(home string) []string {
	b, err := os.ReadFile(V1CredentialsPath(home))
	if err != nil {
		return nil
	}
	return credentialKeys(b)
}

// Resolve turns flags, environment, credentials and config into a Setup
// for the alias. alias may be "" for commands without one.
func Resolve(o Options, alias string) (*Setup, error) {
	s, err := New(o)
	if err != nil {
		return nil, err
	}
	// 1. Profile, API key and URL.
	u, err := s.ResolveAPI(o)
	if err != nil {
		return nil, err
	}
	// 2. The state tree.
	if err := s.ResolveStateDir(o, u); err != nil {
		return nil, err
	}
	// 3. The config, and the section that owns the alias.
	if err := s.resolveConfig(o, alias); err != nil {
		return nil, err
	}
	return s, nil
}

// New is a Setup with the home, the adapters and the secrets known
// before anything is read: the start of Resolve, and of the doctor.
func New(o Options) (*Setup, error) {
	home := o.Home
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return nil, exit.Errorf(exit.CodeInvalidConfig, "cannot find the home folder: %v; set HOME", err)
		}
		home = h
	}
	if err := checkAdapters(o.Adapters); err != nil {
		return nil, err
	}
	s := &Setup{Home: home, Adapters: o.Adapters, Version: o.Version, Secrets: o.Secrets}
	if s.Secrets == nil {
		s.Secrets = redact.NewSecrets()
	}
	s.Secrets.Add(o.APIKey)
	s.Secrets.Add(v1Keys(home)...)
	return s, nil
}

// ResolveAPI picks the profile and, flag over profile over default, the API
// key and URL; a URL other than file:// needs a key.
func (s *Setup) ResolveAPI(o Options) (*url.URL, error) {
	creds, err := loadCredentials(s.Home, s.Secrets)
	if err != nil {
		return nil, err
	}
	s.Profile = cmp.Or(o.Profile, creds.Default)
	var prof credentialProfile
	if s.Profile != "" {
		if err := ValidateName(s.Profile); err != nil {
			return nil, exit.Errorf(exit.CodeInvalidConfig, "profile name %q: %v", s.Profile, err)
		}
		p, ok := creds.Profiles[s.Profile]
		if !ok && o.Profile != "" {
			return nil, exit.Errorf(exit.CodeCredentialsNotFound, "profile %q is not in %s; add it with `bhw-run login --profile %s`, or pick another --profile (bhw-run profile ls lists them)", s.Profile, CredentialsPath(s.Home), s.Profile)
		}
		prof = p
	}
	if s.Profile == "" && o.APIKey == "" {
		// No profile and no key given: blobhub-worker v1's file, read
		// after the CLI's. A local store needs no key, so a file:// URL
		// given by flag or env takes none from it (nor its state tree name).
		var v1 v1Credentials
		if err := readCredentials(V1CredentialsPath(s.Home), &v1, s.Secrets); err != nil {
			return nil, err
		}
		if u, err := url.Parse(o.APIURL); err != nil || u.Scheme != "file" {
			prof = credentialProfile{Key: v1.API.Key, URL: v1.API.URL}
		}
	}
	s.APIKey = cmp.Or(o.APIKey, prof.APIKey, prof.Key)
	s.APIURL = strings.TrimRight(cmp.Or(o.APIURL, prof.APIURL, prof.URL, DefaultAPIURL), "/")
	u, err := url.Parse(s.APIURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http" && u.Scheme != "file") {
		return nil, exit.Errorf(exit.CodeInvalidConfig, "api url %q is not https://…, http://loopback or file:///abs/dir", ShownURL(s.APIURL))
	}
	if u.Scheme == "file" && (!filepath.IsAbs(u.Path) || u.Host != "") {
		return nil, exit.Errorf(exit.CodeInvalidConfig, "api url %q: a local store needs an absolute path, file:///abs/dir", ShownURL(s.APIURL))
	}
	if u.Scheme != "file" && s.APIKey == "" {
		return nil, exit.Errorf(exit.CodeCredentialsNotFound,
			"no API key for %s; set BLOBHUB_API_KEY, pass --api-key, or add a profile to %s with `bhw-run login --api-key-stdin` (or use --api-url file:///abs/dir for a local store)",
			ShownURL(s.APIURL), CredentialsPath(s.Home))
	}
	return u, nil
}

// ResolveStateDir names the state tree: --state-dir, else one per profile,
// API key or local store under ~/.blobhub-worker/profiles.
func (s *Setup) ResolveStateDir(o Options, u *url.URL) error {
	switch {
	case s.Profile != "":
		s.StateName = s.Profile
	case s.APIKey != "":
		s.StateName = "key-" + shortHash(s.APIKey)
	default:
		s.StateName = "local-" + shortHash(u.Path)
	}
	s.StateDir = o.StateDir
	if s.StateDir == "" {
		s.StateDir = filepath.Join(s.Home, ".blobhub-worker", "profiles", s.StateName)
	}
	if !filepath.IsAbs(s.StateDir) {
		abs, err := filepath.Abs(s.StateDir)
		if err != nil {
			return exit.Errorf(exit.CodeInvalidConfig, "state dir %q: %v", s.StateDir, err)
		}
		s.StateDir = abs
	}
	return nil
}

// resolveConfig reads and checks config.yaml (--config, else the state
// tree's, which may be missing) and picks the section.
func (s *Setup) resolveConfig(o Options, alias string) error {
	if err := s.ReadConfig(o); err != nil {
		return err
	}
	return s.ResolveSection(o, alias)
}

// ReadConfig reads config.yaml into s.Config and checks it: --config,
// else the state tree's, which may be missing.
func (s *Setup) ReadConfig(o Options) error {
	cfgPath := o.ConfigPath
	explicit := cfgPath != ""
	if cfgPath == "" {
		cfgPath = filepath.Join(s.StateDir, "config.yaml")
	}
	s.ConfigPath = cfgPath
	if err := loadConfig(cfgPath, explicit, &s.Config); err != nil {
		return err
	}
	if s.Config.Polling != nil {
		s.Ignored = append(s.Ignored, "polling")
	}
	s.Ignored = append(s.Ignored, workerOnlyKeys(&s.Config)...)
	return validateConfig(&s.Config, s)
}

// DefaultConfig is the config with every default and no file, for a
// check that needs one before the file can be located (doctor without
// credentials checks the agents with it).
func (s *Setup) DefaultConfig() error {
	s.Config = Config{}
	return validateConfig(&s.Config, s)
}

// ResolveSection picks the section that owns alias ("" for a command
// without one) and names its folder in the state tree.
func (s *Setup) ResolveSection(o Options, alias string) error {
	sec, why, err := chooseSection(s.Config.Sections, o, alias)
	if err != nil {
		return err
	}
	s.Section, s.SectionWhy, s.alias = sec, why, alias
	if !blobhub.IsSessionID(sec.Session.SessionID) && !strings.HasPrefix(s.APIURL, "file:") {
		// A session alias: its folder is named once ResolveSession has
		// its id, before anything reads or writes there.
		s.JobDir = ""
		return nil
	}
	if err := ValidateName(sec.Session.SessionID); err != nil {
		return exit.Errorf(exit.CodeInvalidConfig, "session id %q: %v", sec.Session.SessionID, err)
	}
	s.JobDir = jobDirFor(s.StateDir, sec, alias)
	return nil
}

func loadConfig(path string, explicit bool, c *Config) error {
	b, err := readConfigFile(path)
	if errors.Is(err, fs.ErrNotExist) && !explicit {
		return nil
	}
	var ee *exit.Error
	if errors.As(err, &ee) {
		return err
	}
	if err != nil {
		return exit.Errorf(exit.CodeInvalidConfig, "cannot read config %s: %v", path, err)
	}
	if err := envelope.DecodeYAML(b, c, true); err != nil {
		return exit.Errorf(exit.CodeInvalidConfig, "config %s %v", path, err)
	}
	return nil
}

func validateConfig(c *Config, s *Setup) error {
	if c.Concurrency.MaxAgents < 0 {
		return exit.Errorf(exit.CodeInvalidConfig, "concurrency.max_agents must be 1 or more")
	}
	if c.Concurrency.MaxAgents == 0 {
		c.Concurrency.MaxAgents = 4
	}
	if c.Artifacts.MaxBytes <= 0 {
		c.Artifacts.MaxBytes = 5 << 20
	}
	if c.Artifacts.MaxFiles < 0 {
		return exit.Errorf(exit.CodeInvalidConfig, "artifacts.max_files must be 1 or more (0 or absent: %d)", DefaultMaxFiles)
	}
	if c.Artifacts.MaxFiles == 0 {
		c.Artifacts.MaxFiles = DefaultMaxFiles
	}
	if err := c.Discovery.Validate(); err != nil {
		return err
	}
	for _, r := range c.Workspace.Roots {
		if !filepath.IsAbs(r) {
			return exit.Errorf(exit.CodeInvalidConfig, "workspace.roots: %q is not an absolute path", r)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Agents)) {
		if err := validateAgent(c, s, name); err != nil {
			return err
		}
	}
	var notes []string
	c.Policy.Rules, notes = policy.Migrate(c.Policy.Rules)
	if s != nil {
		s.PolicyNotes = notes
	}
	if err := policy.ValidateRules(c.Policy.Rules); err != nil {
		return exit.Errorf(exit.CodeInvalidConfig, "policy.rules: %v", err)
	}
	if n := c.Concurrency.HeldWaitsMax; n != nil && *n < 1 {
		return exit.Errorf(exit.CodeInvalidConfig, "concurrency.held_waits_max %d is invalid: give 1 or more, or leave it out", *n)
	}
	if err := validateConfine(c); err != nil {
		return err
	}
	seen := map[string]string{}
	for i, s := range c.Sections {
		if s.JobType != "" && s.JobType != JobType {
			return exit.Errorf(exit.CodeUnknownJobType, "sections[%d] (%s): job_type %q is not supported; use %s", i, s.Name, s.JobType, JobType)
		}
		t := s.Session
		var missing []string
		for k, v := range map[string]string{"org_id": t.OrgID, "blob_id": t.BlobID, "revision_id": t.RevisionID, "session_id": t.SessionID} {
			if v == "" {
				missing = append(missing, k)
			}
		}
		if len(missing) > 0 {
			return exit.Errorf(exit.CodeMissingSessionKeys, "sections[%d] (%s): session is missing %s; give all four ids (org_id, blob_id, revision_id, session_id)", i, s.Name, strings.Join(slices.Sorted(slices.Values(missing)), ", "))
		}
		key := t.RevisionID + "/" + t.SessionID + "/" + s.Prefix()
		if prev, dup := seen[key]; dup {
			return exit.Errorf(exit.CodeDuplicateSectionTarget, "sections %q and %q watch the same session and prefix; remove one", prev, s.Name)
		}
		seen[key] = s.Name
	}
	return overlappingPrefixes(c.Sections)
}

// validateAgent checks agents.<name> and decodes its own keys: the home
// under the adapter's HomeKey, the rest by the adapter's Options.
func validateAgent(c *Config, s *Setup, name string) error {
	ad := s.Adapter(name)
	if slices.Contains(workerAgentTypes, name) && (ad == nil || ad.Unsupported != "") {
		// blobhub-worker's own agent type this build cannot run: read,
		// checked as the worker checks it, named by doctor; a thread of
		// that type fails AGENT_TYPE_UNSUPPORTED as before.
		if c.Agents[name] == nil {
			c.Agents[name] = &AgentConfig{}
		}
		return validateWorkerAgentKeys(c.Agents[name], name)
	}
	if ad == nil {
		return exit.Errorf(exit.CodeInvalidConfig, "agents.%s: no such agent type; use %s", name, s.AgentTypes())
	}
	if ad.Unsupported != "" {
		return exit.Errorf(exit.CodeInvalidConfig, "agents.%s: %s; remove the block or use %s", name, ad.Unsupported, s.AgentTypes())
	}
	a := c.Agents[name]
	if a == nil {
		a = &AgentConfig{}
		c.Agents[name] = a
	}
	switch a.Permissions {
	case "", PermAutonomous, PermGuarded, PermApproval:
	default:
		return exit.Errorf(exit.CodeInvalidConfig, "agents.%s.permissions %q: use autonomous, guarded or approval", name, a.Permissions)
	}
	if err := validateWorkerAgentKeys(a, name); err != nil {
		return err
	}
	if err := a.Budget.Validate("agents." + name + ".budget"); err != nil {
		return exit.Errorf(exit.CodeInvalidConfig, "%v; give caps above 0, or leave the key out for no cap", err)
	}
	own := maps.Clone(a.Own)
	key := HomeKey(ad)
	if v, ok := own[key]; ok {
		home, isString := v.(string)
		if !isString && v != nil {
			return exit.Errorf(exit.CodeInvalidConfig, "agents.%s.%s: want a path, got %v", name, key, v)
		}
		a.Home = home
		delete(own, key)
	}
	var err error
	if ad.Options != nil {
		a.Options, err = ad.Options(own)
	} else if len(own) > 0 {
		err = &agent.UnknownKeyError{Key: slices.Sorted(maps.Keys(own))[0]}
	}
	var uk *agent.UnknownKeyError
	if errors.As(err, &uk) {
		keys := slices.Sorted(slices.Values(append(append([]string{key}, commonAgentKeys...), uk.Known...)))
		where, meant := s.ConfigPath, ""
		if b, err := os.ReadFile(s.ConfigPath); err == nil {
			if line := envelope.KeyLine(b, "agents", name, uk.Key); line > 0 {
				where = fmt.Sprintf("%s line %d", where, line)
			}
		}
		if k := envelope.ClosestKey(uk.Key, keys); k != "" {
			meant = " (did you mean " + k + "?)"
		}
		return exit.Errorf(exit.CodeInvalidConfig, "config %s: agents.%s: unknown key %q%s; the keys are %s", where, name, uk.Key, meant, strings.Join(keys, ", "))
	}
	if err != nil {
		return exit.Errorf(exit.CodeInvalidConfig, "agents.%s: %v", name, err)
	}
	return nil
}

// Where a section or session was given (Options.SectionFrom, SessionFrom).
const (
	FromFlag = "flag" // the command line
	FromEnv  = "env"  // BHW_SECTION, BHW_REVISION_ID, BHW_SESSION_ID
)

// rank orders where a value came from: flag > env > unset (the config).
// A value whose source is not said is the caller's own, a flag.
func rank(from, value string) int {
	switch {
	case value == "":
		return 0
	case from == FromEnv:
		return 1
	}
	return 2
}

func sectionSource(o Options) string {
	if o.SectionFrom == FromEnv {
		return "BHW_SECTION"
	}
	return "--section"
}

func sessionSource(o Options) string {
	if o.SessionFrom == FromEnv {
		return "BHW_REVISION_ID/BHW_SESSION_ID"
	}
	return "--revision/--session"
}

// chooseSection picks the section that owns alias ("" for commands
// without one). A session given with --revision/--session (or their
// variables) wins over the config's sections unless --section was given at
// a higher level (flag > env > config); the config's own section for that
// session is used when it has one.
func chooseSection(secs []Section, o Options, alias string) (Section, string, error) {
	sec, ses := rank(o.SectionFrom, o.Section), rank(o.SessionFrom, o.RevisionID+o.SessionID)
	if ses > 0 && (o.RevisionID == "" || o.SessionID == "") {
		missing := "the revision id (--revision, BHW_REVISION_ID)"
		if o.SessionID == "" {
			missing = "the session id (--session, BHW_SESSION_ID)"
		}
		return Section{}, "", exit.Errorf(exit.CodeInvalidConfig, "a session needs both ids; %s is missing", missing)
	}
	switch {
	case sec > 0 && sec == ses:
		return Section{}, "", exit.Errorf(exit.CodeInvalidConfig, "%s %q and %s both name the session; pass one of them", sectionSource(o), o.Section, sessionSource(o))
	case ses > sec:
		return sessionSection(secs, o, alias)
	case sec > 0:
		for _, s := range secs {
			if s.Name == o.Section {
				return s, "from " + sectionSource(o), nil
			}
		}
		return Section{}, "", exit.Errorf(exit.CodeInvalidConfig, "no section named %q in the config (%s)", o.Section, sectionSource(o))
	}
	if s, ok, err := byPrefix(secs, alias); err != nil || ok {
		return s, "the section whose session_prefix the alias starts with", err
	}
	switch {
	case len(secs) == 1:
		return secs[0], "the only section of the config", nil
	case len(secs) == 0:
		return Section{}, "", exit.Errorf(exit.CodeInvalidConfig, "no session configured; pass --revision and --session (or BHW_REVISION_ID/BHW_SESSION_ID), or add a section to config.yaml")
	case alias == "":
		return Section{}, "", exit.Errorf(exit.CodeInvalidConfig, "config.yaml has %d sections; pass --section to pick one", len(secs))
	}
	return Section{}, "", exit.Errorf(exit.CodeInvalidConfig, "no config section owns alias %q; pass --section or give the sections a session_prefix", alias)
}

// sessionSection is the section of the session o names: the config's own
// for it (by the alias's prefix when several share it), else one that
// covers the whole session.
func sessionSection(secs []Section, o Options, alias string) (Section, string, error) {
	why := "from " + sessionSource(o)
	var same []Section
	for _, s := range secs {
		if s.Session.RevisionID == o.RevisionID && s.Session.SessionID == o.SessionID {
			same = append(same, s)
		}
	}
	if s, ok, err := byPrefix(same, alias); err != nil || ok {
		return s, why + ", the config's section for it", err
	}
	if len(same) == 1 && (alias == "" || same[0].Prefix() == "") {
		return same[0], why + ", the config's section for it", nil
	}
	return Section{Name: "flags", JobType: JobType, Session: SessionTuple{RevisionID: o.RevisionID, SessionID: o.SessionID}}, why, nil
}

// byPrefix is the section with the longest session_prefix that alias
// starts with; ok is false when none has one.
func byPrefix(secs []Section, alias string) (Section, bool, error) {
	if alias == "" {
		return Section{}, false, nil
	}
	best, bestLen, tie := -1, -1, false
	for i, s := range secs {
		p := s.Prefix()
		if p == "" || !strings.HasPrefix(alias, p) {
			continue
		}
		switch {
		case len(p) > bestLen:
			best, bestLen, tie = i, len(p), false
		case len(p) == bestLen:
			tie = true
		}
	}
	if tie {
		return Section{}, false, exit.Errorf(exit.CodeInvalidConfig, "alias %q matches several sections with the same session_prefix; pass --section", alias)
	}
	if best < 0 {
		return Section{}, false, nil
	}
	return secs[best], true, nil
}

// Where names the section and session the setup resolved and how it was
// chosen, for a command that finds nothing there.
func (s *Setup) Where() string {
	t := s.Section.Session
	w := fmt.Sprintf("section %q (session %s, revision %s", s.Section.Name, t.SessionID, t.RevisionID)
	if p := s.Section.Prefix(); p != "" {
		w += fmt.Sprintf(", aliases under %q", p)
	}
	if s.SectionWhy != "" {
		w += "; " + s.SectionWhy
	}
	return w + ")"
}

// ShownURL is an API URL fit for a message: no user info, query or
// fragment, which may carry a key.
func ShownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])[:12]
}

// PersonKey resolves the key the person posts with: --as PROFILE, else the
// resolved one.
func PersonKey(s *Setup, as string) (string, error) {
	if as == "" {
		return s.APIKey, nil
	}
	creds, err := loadCredentials(s.Home, s.Secrets)
	if err != nil {
		return "", err
	}
	p, ok := creds.Profiles[as]
	if !ok {
		return "", exit.Errorf(exit.CodeCredentialsNotFound, "profile %q (--as) is not in %s", as, CredentialsPath(s.Home))
	}
	return cmp.Or(p.APIKey, p.Key), nil
}

// logIgnored says at debug which documented daemon blocks of config.yaml
// this run has no use for.
func (s *Setup) LogIgnored(log *slog.Logger) {
	if s == nil {
		return
	}
	for _, b := range s.Ignored {
		log.Debug("config.yaml block read and ignored: it tunes the blobhub-worker daemon, a one-shot run has no use for it", "block", b)
	}
	if len(s.PolicyNotes) > 0 {
		log.Warn("config.yaml policy.rules are in bhw-run's older spelling, read as the worker's: rewrite them as {id, effect, action, command: [globs], outside} (docs/configuration.md)", "how", strings.Join(s.PolicyNotes, " | "))
	}
}

// validateWorkerAgentKeys checks agents.<type>'s daemon keys as the daemon
// does: turn_retries 0 or more, wait "", held or parked.
func validateWorkerAgentKeys(a *AgentConfig, name string) error {
	if a == nil {
		return nil
	}
	if a.TurnRetries != nil && *a.TurnRetries < 0 {
		return exit.Errorf(exit.CodeInvalidConfig, "agents.%s.turn_retries %d is invalid: give 0 or more, or leave it out", name, *a.TurnRetries)
	}
	switch a.Wait {
	case "", "held", "parked":
	default:
		return exit.Errorf(exit.CodeInvalidConfig, "agents.%s.wait %q is invalid: write held or parked, or leave it out", name, a.Wait)
	}
	switch a.Permissions {
	case "", PermAutonomous, PermGuarded, PermApproval:
	default:
		return exit.Errorf(exit.CodeInvalidConfig, "agents.%s.permissions %q: use autonomous, guarded or approval", name, a.Permissions)
	}
	return nil
}

// DefaultTurnRetries is agents.<type>.turn_retries left out: blobhub-worker's
// default.
const DefaultTurnRetries = 3

// TurnRetries is agents.<agentType>.turn_retries, or DefaultTurnRetries.
func (c *Config) TurnRetries(agentType string) int {
	if a := c.Agents[agentType]; a != nil && a.TurnRetries != nil {
		return *a.TurnRetries
	}
	return DefaultTurnRetries
}

// workerOnlyKeys names the keys of c that blobhub-worker reads and a
// one-shot run does not use, for the debug log and doctor.
func workerOnlyKeys(c *Config) []string {
	var out []string
	if c.Concurrency.HeldWaitsMax != nil {
		out = append(out, "concurrency.held_waits_max")
	}
	if c.Attachments != nil {
		for _, k := range slices.Sorted(maps.Keys(c.Attachments.Rest)) {
			out = append(out, "attachments."+k)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Agents)) {
		a := c.Agents[name]
		if a == nil {
			continue
		}
		if a.Debug {
			out = append(out, "agents."+name+".debug")
		}
		if a.Wait != "" {
			out = append(out, "agents."+name+".wait")
		}
	}
	return out
}
