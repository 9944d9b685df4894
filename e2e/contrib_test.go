package e2e

// The operations kit in contrib/ and the README's pipeline, checked for
// real: the units by systemd-analyze (and always as INI with the keys that
// matter), the workflow by its keys, and every recipe's command executed
// against a file:// store with two pending threads and the fake agent,
// with the bhw-run binary TestMain built first on PATH.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/claude/claudetest"
	"github.com/blobhub/bhw-run/exit"
	"github.com/blobhub/bhw-run/internal/sysdeps"
	"github.com/blobhub/bhw-run/lock"
	"github.com/blobhub/bhw-run/run"
	"github.com/blobhub/bhw-run/setup"
)

// readmePipeline is the recipe line of the README.
func readmePipeline(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(line, "set -m; trap ") && strings.Contains(line, "bhw-run ls --runnable --print0 | xargs") {
			return line
		}
	}
	t.Fatal("the README holds no `set -m; trap …; (set -o pipefail; bhw-run ls --runnable --print0 | xargs …) & set +m; wait $!` line")
	return ""
}

// unitFile is an INI unit file: section → key → values in order.
type unitFile map[string]map[string][]string

func parseUnit(t *testing.T, path string) unitFile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unitFile{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" || strings.HasSuffix(line, "\\") {
				t.Fatalf("%s:%d: not a key=value line of a section: %q", path, n, line)
			}
			u[section][strings.TrimSpace(k)] = append(u[section][strings.TrimSpace(k)], strings.TrimSpace(v))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

func (u unitFile) want(t *testing.T, section, key, value string) {
	t.Helper()
	if !slices.Contains(u[section][key], value) {
		t.Errorf("[%s] %s=%q, want %q", section, key, u[section][key], value)
	}
}

// execStart is the unit's one ExecStart=, split as systemd splits it; it
// fails the test unless there is exactly one.
func (u unitFile) execStart(t *testing.T) []string {
	t.Helper()
	execStart := u["Service"]["ExecStart"]
	if len(execStart) != 1 {
		t.Fatalf("ExecStart=%q, want one", execStart)
	}
	return systemdArgs(t, execStart[0])
}

// systemdArgs splits an ExecStart= value the way systemd does for what the
// unit uses: words, double quotes with C escapes, and $$ for a literal $.
func systemdArgs(t *testing.T, s string) []string {
	t.Helper()
	var args []string
	var cur strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '$':
			if i+1 >= len(s) || s[i+1] != '$' {
				t.Fatalf("ExecStart has a $ systemd would expand at %d: %q", i, s)
			}
			cur.WriteByte('$')
			i++
			inWord = true
		case c == '\\' && quoted:
			if i+1 >= len(s) {
				t.Fatalf("ExecStart ends in a backslash: %q", s)
			}
			cur.WriteByte(s[i+1])
			i++
		case c == '"':
			quoted = !quoted
			inWord = true
		case c == ' ' && !quoted:
			if inWord {
				args = append(args, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("ExecStart has an open quote: %q", s)
	}
	if inWord {
		args = append(args, cur.String())
	}
	return args
}

func TestContribSystemdUnits(t *testing.T) {
	svc := parseUnit(t, "contrib/systemd/bhw-run.service")
	svc.want(t, "Service", "Type", "oneshot")
	svc.want(t, "Service", "SuccessExitStatus", "75")
	args := svc.execStart(t)
	if want := []string{"/bin/bash", "-c", readmePipeline(t)}; !slices.Equal(args, want) {
		t.Errorf("ExecStart runs %q\nwant the README's pipeline under bash: %q", args, want)
	}
	tm := parseUnit(t, "contrib/systemd/bhw-run.timer")
	tm.want(t, "Timer", "Unit", "bhw-run.service")
	tm.want(t, "Install", "WantedBy", "timers.target")
	if len(tm["Timer"]["OnUnitInactiveSec"])+len(tm["Timer"]["OnCalendar"]) == 0 {
		t.Error("the timer has neither OnUnitInactiveSec= nor OnCalendar=")
	}

	out, err := exec.Command(sysdeps.Path(t, "systemd-analyze"), "verify", "--man=no", "contrib/systemd/bhw-run.service", "contrib/systemd/bhw-run.timer").CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// workflow is the part of a GitHub Actions workflow the test reads.
type workflow struct {
	On   map[string]any `yaml:"on"`
	Jobs map[string]struct {
		RunsOn      []string          `yaml:"runs-on"`
		Needs       any               `yaml:"needs"`
		If          string            `yaml:"if"`
		Concurrency any               `yaml:"concurrency"`
		Outputs     map[string]string `yaml:"outputs"`
		Strategy    struct {
			Matrix map[string]any `yaml:"matrix"`
		} `yaml:"strategy"`
		Steps []struct {
			ID    string            `yaml:"id"`
			Shell string            `yaml:"shell"`
			Env   map[string]string `yaml:"env"`
			Run   string            `yaml:"run"`
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

func loadWorkflow(t *testing.T) workflow {
	t.Helper()
	b, err := os.ReadFile("contrib/github-actions/bhw-run.yml")
	if err != nil {
		t.Fatal(err)
	}
	var w workflow
	if err := yaml.Unmarshal(b, &w); err != nil {
		t.Fatalf("the workflow is not YAML: %v", err)
	}
	return w
}

func TestContribWorkflowKeys(t *testing.T) {
	w := loadWorkflow(t)
	if _, ok := w.On["schedule"]; !ok {
		t.Error("on: has no schedule")
	}
	if _, ok := w.On["workflow_dispatch"]; !ok {
		t.Error("on: has no workflow_dispatch")
	}
	d, r := w.Jobs["discover"], w.Jobs["run"]
	for name, runsOn := range map[string][]string{"discover": d.RunsOn, "run": r.RunsOn} {
		if !slices.Equal(runsOn, []string{"self-hosted", "bhw-run"}) {
			t.Errorf("jobs.%s.runs-on %q, want [self-hosted, bhw-run]", name, runsOn)
		}
	}
	if len(d.Steps) == 0 || !strings.Contains(d.Steps[0].Run, "bhw-run ls --runnable --json") || d.Outputs["matrix"] != "${{ steps."+d.Steps[0].ID+".outputs.matrix }}" {
		t.Errorf("jobs.discover does not output the matrix of `bhw-run ls --runnable --json`: %+v", d)
	}
	if r.Needs != "discover" || r.Strategy.Matrix["include"] != "${{ fromJSON(needs.discover.outputs.matrix) }}" {
		t.Errorf("jobs.run: needs %v, matrix %v", r.Needs, r.Strategy.Matrix)
	}
	if r.Concurrency != "bhw-run-${{ matrix.alias }}" {
		t.Errorf("jobs.run.concurrency %v, want bhw-run-${{ matrix.alias }}", r.Concurrency)
	}
	if len(r.Steps) != 1 || r.Steps[0].Env["ALIAS"] != "${{ matrix.alias }}" || !strings.Contains(r.Steps[0].Run, `bhw-run run --slot-wait 1h -- "$ALIAS"`) {
		t.Errorf("jobs.run.steps: %+v", r.Steps)
	}
	if strings.Contains(r.Steps[0].Run, "${{") {
		t.Error("jobs.run splices an expression into its script; pass it through env")
	}
}

// fakeClaudeDone points the config's Claude agent at the fake (the test
// binary) answering every turn with one text, and writes the config.
func (e *e2eEnv) fakeClaudeDone() {
	e.t.Helper()
	e.fakeClaude([]claudetest.FakeStep{{Text: "done"}})
}

// fakeClaude points agents.claude_code at the fake agent (this test binary)
// playing one turn of steps, and writes config.yaml.
func (e *e2eEnv) fakeClaude(steps []claudetest.FakeStep) {
	e.t.Helper()
	exe, err := os.Executable()
	if err != nil {
		e.t.Fatal(err)
	}
	script := filepath.Join(e.root, "fake-claude.json")
	b, err := json.Marshal(claudetest.FakeScript{Turns: [][]claudetest.FakeStep{steps}})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(script, b, 0o600); err != nil {
		e.t.Fatal(err)
	}
	e.agentConfig(claudeType).Executable = exe
	e.agentConfig(claudeType).Env = map[string]string{claudetest.FakeAgentEnv: script}
	e.writeConfig()
}

// pipelineEnv is an e2e env on a file:// store whose config points the
// Claude agent at the fake playing one short turn.
func pipelineEnv(t *testing.T) *e2eEnv {
	e := newE2E(t)
	e.useFileStore()
	e.fakeClaudeDone()
	return e
}

// shell runs argv with bhw-run's environment and the built binary first on
// PATH, and returns the exit code and the output.
func (e *e2eEnv) shell(extraEnv []string, argv ...string) (int, string) {
	e.t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(e.environ(""), "PATH="+filepath.Dir(bhwBin)+":"+os.Getenv("PATH"))
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.Dir = e.root
	out, err := cmd.CombinedOutput()
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			e.t.Fatalf("%q: %v", argv, err)
		}
		code = ee.ExitCode()
	}
	e.t.Logf("%q → exit %d\n%s", argv, code, tail(string(out), 4000))
	return code, string(out)
}

// ranOnce checks each thread is active with exactly one turn_end.
func (e *e2eEnv) ranOnce(aliases ...string) {
	e.t.Helper()
	for _, a := range aliases {
		if st := e.wireState(a); st != "active" || count(e.itemTypes(a), "turn_end") != 1 {
			e.t.Errorf("%s: wire %s, items %v; want active with one turn_end", a, st, e.itemTypes(a))
		}
	}
}

// TestContribRecipes runs the README's pipeline, the crontab's command, the
// unit's ExecStart, the CronJob's and the Nomad task's scripts and the
// workflow's scripts against two pending threads each, in turn on one store; a pass runs only what is runnable, so earlier
// threads stay at one turn.
func TestContribRecipes(t *testing.T) {
	e := pipelineEnv(t)
	var done []string
	handOffTwo := func(name string) []string {
		a := []string{"ci/" + name + "/a", "ci/" + name + "/b"}
		for _, alias := range a {
			e.handOff(alias, claudeType, "", "please do "+alias)
		}
		return a
	}
	check := func(name string, code int, pair []string) {
		t.Helper()
		if code != 0 {
			t.Fatalf("%s: exit %d", name, code)
		}
		done = append(done, pair...)
		e.ranOnce(done...)
	}

	// readme
	{
		pair := handOffTwo("readme")
		code, _ := e.shell(nil, "bash", "-c", readmePipeline(t))
		check("README pipeline", code, pair)
		// pipefail: a failing ls (here a config file that is missing) fails
		// the pass, though xargs alone would exit 0 on no input.
		if code, _ := e.shell([]string{"BHW_CONFIG=" + filepath.Join(e.root, "missing.yaml")}, "bash", "-c", readmePipeline(t)); code == 0 {
			t.Error("the pipeline exits 0 when ls fails")
		}
	}

	// cron
	{
		pair := handOffTwo("cron")
		// cron runs the command with /bin/sh; the line sets PATH for cron,
		// the test keeps the built binary first.
		code, _ := e.shell(nil, "/bin/sh", "-c", cronCommand(t))
		check("crontab", code, pair)
		if log, err := os.ReadFile(filepath.Join(e.home, ".blobhub-worker", "cron.log")); err != nil || !strings.Contains(string(log), "turn_completed") {
			t.Errorf("cron.log: %v\n%s", err, log)
		}
	}

	// systemd
	{
		svc := parseUnit(t, "contrib/systemd/bhw-run.service")
		args := svc.execStart(t)
		pair := handOffTwo("systemd")
		code, _ := e.shell(nil, args...)
		check("ExecStart", code, pair)
	}

	// kubernetes, nomad: the container's and the task's bash -c script.
	_, k8s := k8sScript(t)
	for name, script := range map[string]string{"kubernetes": k8s, "nomad": nomadScript(t)} {
		pair := handOffTwo(name)
		code, _ := e.shell(nil, "/bin/bash", "-c", script)
		check(name, code, pair)
	}

	// github-actions
	{
		w := loadWorkflow(t)
		pair := handOffTwo("actions")
		out := filepath.Join(e.root, "github_output")
		code, _ := e.shell([]string{"GITHUB_OUTPUT=" + out}, "bash", "-e", "-c", w.Jobs["discover"].Steps[0].Run)
		if code != 0 {
			t.Fatalf("discover: exit %d", code)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		line, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "matrix=")
		var matrix []run.Listing
		if !ok || json.Unmarshal([]byte(line), &matrix) != nil {
			t.Fatalf("GITHUB_OUTPUT holds %q, want matrix=<JSON array>", b)
		}
		var aliases []string
		for _, m := range matrix {
			aliases = append(aliases, m.Alias)
		}
		if !slices.Equal(aliases, pair) {
			t.Fatalf("the matrix holds %v, want %v", aliases, pair)
		}
		step := w.Jobs["run"].Steps[0].Run
		for _, a := range aliases {
			if code, _ := e.shell([]string{"ALIAS=" + a}, "bash", "-e", "-c", step); code != 0 {
				t.Fatalf("run %s: exit %d", a, code)
			}
		}
		check("workflow", 0, pair)

		// 75 is success for the step; any other failure is not.
		busy := pair[0]
		e.post(busy, "more")
		lk, err := lock.Acquire(context.Background(), filepath.Join(setup.ThreadDir(e.jobDir(), busy), "thread.lock"), 0)
		if err != nil {
			t.Fatal(err)
		}
		code, out75 := e.shell([]string{"ALIAS=" + busy}, "bash", "-e", "-c", step)
		_ = lk.Unlock()
		if code != 0 || !strings.Contains(out75, "exit 75") {
			t.Errorf("a locked thread: step exit %d, want 0 with the exit-75 notice", code)
		}
		if code, _ := e.shell([]string{"ALIAS=ci/none"}, "bash", "-e", "-c", step); code != exit.NoThread {
			t.Errorf("a missing thread: step exit %d, want %d", code, exit.NoThread)
		}
	}

	// Nothing else is left to run (the Kubernetes and Nomad scripts left
	// their threads answered once).
	ls := exec.Command(bhwBin, "ls", "--runnable")
	ls.Env = e.environ("")
	out, err := ls.Output()
	if err != nil || string(out) != "ci/actions/a\n" {
		t.Errorf("ls --runnable at the end: %v %q, want only the thread posted to while locked", err, out)
	}
}

// TestContribScripts75: the scripts of the engines without a
// SuccessExitStatus (Kubernetes, Nomad) end 0 when the pass ends 75 (ls found
// BlobHub unreachable: try again later) and keep every other failure, with a
// stand-in bhw-run first on PATH that exits as told.
func TestContribScripts75(t *testing.T) {
	_, k8s := k8sScript(t)
	for name, script := range map[string]string{"kubernetes": k8s, "nomad": nomadScript(t)} {
		for _, tc := range []struct{ ls, want int }{{0, 0}, {75, 0}, {78, 78}, {77, 77}} {
			dir := t.TempDir()
			stub := fmt.Sprintf("#!/bin/sh\n[ \"$1\" = ls ] && exit %d\nexit 0\n", tc.ls)
			if err := os.WriteFile(filepath.Join(dir, "bhw-run"), []byte(stub), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("/bin/bash", "-c", script)
			cmd.Env = []string{"PATH=" + dir + ":/usr/bin:/bin"}
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.want {
				t.Errorf("%s: ls exits %d, the script exits %d; want %d", name, tc.ls, code, tc.want)
			}
		}
	}
}

// installPrefix runs the README's `make install` with PREFIX set to a
// folder of the test's and returns it, once the files it promises are there.
func installPrefix(t *testing.T) string {
	t.Helper()
	prefix := t.TempDir()
	cmd := exec.Command("make", "install")
	cmd.Env = append(os.Environ(), "PREFIX="+prefix)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make install PREFIX=%s: %v\n%s", prefix, err, out)
	}
	// It says where it installed, and that a PREFIX whose bin is not on
	// PATH (the test's never is) needs adding there.
	for _, want := range []string{"installed " + prefix + "/bin/bhw-run", prefix + "/bin is not on your PATH: add it"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("make install PREFIX=%s did not say %q:\n%s", prefix, want, out)
		}
	}
	for rel, mode := range map[string]os.FileMode{
		"bin/bhw-run":                                  0o755,
		"share/man/man1/bhw-run.1":                     0o644,
		"share/bash-completion/completions/bhw-run":    0o644,
		"share/zsh/site-functions/_bhw-run":            0o644,
		"share/fish/vendor_completions.d/bhw-run.fish": 0o644,
	} {
		fi, err := os.Stat(filepath.Join(prefix, rel))
		if err != nil || fi.Mode().Perm() != mode || fi.Size() == 0 {
			t.Errorf("make install left %s as %v (%v), want a file of mode %04o", rel, fi, err, mode)
		}
	}
	return prefix
}

// recipePath is the PATH a recipe gives bhw-run (the crontab's PATH= line,
// the unit's Environment=PATH=), checked to hold the default PREFIX's bin
// and moved to prefix's.
func recipePath(t *testing.T, name, path, prefix string) string {
	t.Helper()
	dirs := strings.Split(path, ":")
	if !slices.Contains(dirs, "/usr/local/bin") {
		t.Fatalf("the %s's PATH %q lacks /usr/local/bin, where make install puts bhw-run", name, path)
	}
	for i, d := range dirs {
		if d == "/usr/local/bin" {
			dirs[i] = filepath.Join(prefix, "bin")
		}
	}
	return strings.Join(dirs, ":")
}

// crontabPath is the crontab's PATH= line.
func crontabPath(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("contrib/cron/bhw-run.crontab")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "PATH="); ok {
			return p
		}
	}
	t.Fatal("the crontab sets no PATH")
	return ""
}

// TestContribRecipesFreshHome runs the crontab's command and the unit's
// ExecStart as a new account would: bhw-run installed by `make install`
// (under a PREFIX of the test's, found through the recipe's own PATH, not
// the test's build), a HOME with nothing in it — no ~/.blobhub-worker —
// and the state tree at its default place; the store, session and config
// come from the environment a person adds to the recipe.
func TestContribRecipesFreshHome(t *testing.T) {
	prefix := installPrefix(t)
	e := pipelineEnv(t)
	svc := parseUnit(t, "contrib/systemd/bhw-run.service")
	var unitPath string
	for _, kv := range svc["Service"]["Environment"] {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			unitPath = p
		}
	}
	recipes := []struct {
		name string
		path string
		argv []string
	}{
		{"crontab", recipePath(t, "crontab", crontabPath(t), prefix), []string{"/bin/sh", "-c", cronCommand(t)}},
		{"unit", recipePath(t, "unit", unitPath, prefix), svc.execStart(t)},
	}
	for _, rc := range recipes {
		t.Run(rc.name, func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "home")
			if err := os.Mkdir(home, 0o755); err != nil {
				t.Fatal(err)
			}
			env := []string{"HOME=" + home, "LOGNAME=bhw", "SHELL=/bin/sh", "PATH=" + rc.path, "LANG=C.UTF-8",
				"BLOBHUB_API_URL=file://" + e.srv.Dir(), "BHW_REVISION_ID=" + bhtest.RevisionID, "BHW_SESSION_ID=" + bhtest.SessionID,
				"BHW_CONFIG=" + e.configPath()}
			pair := []string{"fresh/" + rc.name + "/a", "fresh/" + rc.name + "/b"}
			for _, alias := range pair {
				cmd := exec.Command(filepath.Join(prefix, "bin", "bhw-run"), "thread", "new", "--work-folder", e.work, "--message", "please do "+alias, alias)
				cmd.Env = env
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("thread new %s: %v\n%s", alias, err, out)
				}
			}
			cmd := exec.Command(rc.argv[0], rc.argv[1:]...)
			cmd.Env, cmd.Dir = env, home
			out, err := cmd.CombinedOutput()
			t.Logf("%s → %v\n%s", rc.name, err, out)
			if err != nil {
				t.Fatalf("the %s's command failed from a fresh HOME: %v\n%s", rc.name, err, out)
			}
			e.ranOnce(pair...)
			state, err := filepath.Glob(filepath.Join(home, ".blobhub-worker", "profiles", "local-*", "jobs"))
			if err != nil || len(state) != 1 {
				t.Errorf("no state tree at ~/.blobhub-worker/profiles/local-<hash>: %v %v", state, err)
			}
			if rc.name == "crontab" {
				if log, err := os.ReadFile(filepath.Join(home, ".blobhub-worker", "cron.log")); err != nil || !strings.Contains(string(log), "turn_completed") {
					t.Errorf("cron.log: %v\n%s", err, log)
				}
			}
		})
	}
}
