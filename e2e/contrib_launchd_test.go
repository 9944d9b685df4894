package e2e

// The launchd recipe (contrib/launchd): read as the property list launchd
// reads, checked for the keys that make it safe, and its command run like
// the other recipes' against a file:// store with the fake agent. launchd
// itself is not here: the keys are what this test can hold it to.

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const launchdPlist = "contrib/launchd/com.blobhub.bhw-run.plist"

// readPlist reads an XML property list into Go values: dict →
// map[string]any, array → []any, string → string, integer → int64,
// true/false → bool. Anything else is an error, as is a dict whose key and
// value do not alternate.
func readPlist(r io.Reader) (any, error) {
	d := xml.NewDecoder(r)
	for {
		tok, err := d.Token()
		if err != nil {
			return nil, fmt.Errorf("no <plist>: %w", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if se.Name.Local != "plist" {
				return nil, fmt.Errorf("the root element is <%s>, want <plist>", se.Name.Local)
			}
			v, end, err := plistValue(d)
			if err != nil || end {
				return nil, errors.Join(errors.New("an empty <plist>"), err)
			}
			return v, nil
		}
	}
}

// plistValue reads the next value; end is true at the parent's end tag.
func plistValue(d *xml.Decoder) (v any, end bool, err error) {
	for {
		tok, err := d.Token()
		if err != nil {
			return nil, false, err
		}
		switch t := tok.(type) {
		case xml.EndElement:
			return nil, true, nil
		case xml.StartElement:
			switch t.Name.Local {
			case "dict":
				m := map[string]any{}
				for {
					k, end, err := plistValue(d)
					if err != nil || end {
						return m, false, err
					}
					key, ok := k.(plistKey)
					if !ok {
						return nil, false, fmt.Errorf("a dict holds %v where a <key> belongs", k)
					}
					v, end, err := plistValue(d)
					if err != nil || end {
						return nil, false, fmt.Errorf("key %q has no value: %v", key, err)
					}
					m[string(key)] = v
				}
			case "array":
				var a []any
				for {
					v, end, err := plistValue(d)
					if err != nil || end {
						return a, false, err
					}
					a = append(a, v)
				}
			case "key", "string", "integer":
				var s string
				if err := d.DecodeElement(&s, &t); err != nil {
					return nil, false, err
				}
				switch t.Name.Local {
				case "key":
					return plistKey(s), false, nil
				case "integer":
					n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
					return n, false, err
				}
				return s, false, nil
			case "true", "false":
				if err := d.Skip(); err != nil {
					return nil, false, err
				}
				return t.Name.Local == "true", false, nil
			default:
				return nil, false, fmt.Errorf("<%s> is not read here", t.Name.Local)
			}
		}
	}
}

type plistKey string

func loadLaunchd(t *testing.T) map[string]any {
	t.Helper()
	f, err := os.Open(launchdPlist)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, err := readPlist(f)
	if err != nil {
		t.Fatalf("%s: %v", launchdPlist, err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s: the top value is %T, want a dict", launchdPlist, v)
	}
	return m
}

// launchdLogPrefix is what the job's command does before the README's
// pipeline: the folder of its log made (a new account has none), its
// output appended to the log, $HOME expanded by the shell, since launchd
// expands nothing in StandardOutPath.
const launchdLogPrefix = `mkdir -p -m 700 "$HOME/.blobhub-worker" && exec >>"$HOME/.blobhub-worker/launchd.log" 2>&1; `

// TestContribLaunchdKeys: one pass a minute and never two at once
// (StartInterval, no KeepAlive, no inetd or socket activation), the
// README's pipeline under /bin/bash with its output in a log, the PATH
// where make install puts bhw-run and Homebrew puts node and npm's agents,
// a bounded stop, and the job's processes not abandoned when it ends.
func TestContribLaunchdKeys(t *testing.T) {
	p := loadLaunchd(t)
	if p["Label"] != "com.blobhub.bhw-run" || filepath.Base(launchdPlist) != p["Label"].(string)+".plist" {
		t.Errorf("Label %v: launchctl names the job by it, and the file should carry it", p["Label"])
	}
	if p["StartInterval"] != int64(60) {
		t.Errorf("StartInterval %v, want 60 (a pass a minute)", p["StartInterval"])
	}
	for _, k := range []string{"KeepAlive", "inetdCompatibility", "Sockets", "StartCalendarInterval", "WatchPaths", "QueueDirectories", "AbandonProcessGroup", "Program"} {
		if v, ok := p[k]; ok && v != false {
			t.Errorf("%s is set (%v): the job must start on its interval only, from ProgramArguments, and take its processes with it", k, v)
		}
	}
	if n, ok := p["ExitTimeOut"].(int64); !ok || n < 10 || n > 120 {
		t.Errorf("ExitTimeOut %v, want the seconds a stop waits for the runs to save their state (10-120)", p["ExitTimeOut"])
	}
	args, _ := p["ProgramArguments"].([]any)
	if len(args) != 3 || args[0] != "/bin/bash" || args[1] != "-c" {
		t.Fatalf("ProgramArguments %q, want /bin/bash -c <command>", args)
	}
	if cmd, _ := args[2].(string); cmd != launchdLogPrefix+readmePipeline(t) {
		t.Errorf("the command is\n%s\nwant\n%s", cmd, launchdLogPrefix+readmePipeline(t))
	}
	env, _ := p["EnvironmentVariables"].(map[string]any)
	path, _ := env["PATH"].(string)
	dirs := strings.Split(path, ":")
	for _, want := range []string{"/usr/local/bin", "/opt/homebrew/bin", "/usr/bin", "/bin"} {
		if !slices.Contains(dirs, want) {
			t.Errorf("PATH %q lacks %s", path, want)
		}
	}
}

// TestContribLaunchdRuns runs the job's command as launchd would (bash -c,
// the plist's environment) against two pending threads: both run once,
// and the log has the pass.
func TestContribLaunchdRuns(t *testing.T) {
	p := loadLaunchd(t)
	e := pipelineEnv(t)
	pair := []string{"launchd/a", "launchd/b"}
	for _, alias := range pair {
		e.handOff(alias, claudeType, "", "please do "+alias)
	}
	args := p["ProgramArguments"].([]any)
	var env []string
	for k, v := range p["EnvironmentVariables"].(map[string]any) {
		if k != "PATH" { // the test keeps the built binary first on PATH
			env = append(env, k+"="+v.(string))
		}
	}
	if code, _ := e.shell(env, args[0].(string), args[1].(string), args[2].(string)); code != 0 {
		t.Fatalf("the job's command exits %d", code)
	}
	e.ranOnce(pair...)
	if log, err := os.ReadFile(filepath.Join(e.home, ".blobhub-worker", "launchd.log")); err != nil || !strings.Contains(string(log), "turn_completed") {
		t.Errorf("launchd.log: %v\n%s", err, log)
	}
}
