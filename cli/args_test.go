package cli

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestParseArgs(t *testing.T) {
	app := (&cliState{adapters: adapters}).app()
	cases := []struct {
		in   []string
		want []string
		err  string
	}{
		{[]string{"a/b", "--json"}, []string{"--json", "--", "a/b"}, ""},
		{[]string{"--lock-wait", "5s", "a/b", "-v"}, []string{"--lock-wait", "5s", "-v", "--", "a/b"}, ""},
		{[]string{"run", "a/b", "--max-duration=1m"}, []string{"--max-duration=1m", "run", "--", "a/b"}, ""},
		{[]string{"run", "--", "-x"}, []string{"run", "--", "-x"}, ""},
		{[]string{"run", "--", "--json"}, []string{"run", "--", "--json"}, ""},
		{[]string{"thread", "post", "a/b", "yes", "--as", "person"}, []string{"thread", "post", "--as", "person", "--", "a/b", "yes"}, ""},
		{[]string{"thread", "new", "a/b", "--work-folder", "/w", "--json"}, []string{"--json", "thread", "new", "--work-folder", "/w", "--", "a/b"}, ""},
		{[]string{"ls", "--runnable", "--print0"}, []string{"ls", "--runnable", "--print0"}, ""},
		// A positional named like a command after another positional stays one.
		{[]string{"run", "thread"}, []string{"run", "--", "thread"}, ""},
		{[]string{"a/b", "--bogus"}, nil, "unknown flag --bogus"},
		{[]string{"a/b", "--lock-wait"}, nil, "needs a value"},
		// A mistyped command is no alias; a mistyped flag points at the
		// command's own help, with the nearest flag.
		{[]string{"thred", "show", "x"}, nil, "unknown command thred; did you mean thread?"},
		{[]string{"thread", "shwo", "x"}, nil, "unknown command thread shwo; did you mean thread show?"},
		{[]string{"thread", "new", "--jsn", "x"}, nil, "unknown flag --jsn for bhw-run thread new; did you mean --json? see bhw-run thread new --help"},
		{[]string{"thread", "post", "--work-folder", "/w", "x", "y"}, nil, "--work-folder is a flag of bhw-run thread new, bhw-run thread edit"},
		{[]string{"ls", "--runable"}, nil, "did you mean --runnable?"},
		{[]string{"help", "thred"}, nil, "unknown command thred; did you mean thread?"},
		// After "--" the words are what was asked for, even several.
		{[]string{"--", "thred", "show"}, []string{"--", "thred", "show"}, ""},
		// An alias named like a command, run explicitly.
		{[]string{"run", "--", "ls"}, []string{"run", "--", "ls"}, ""},
	}
	for _, tc := range cases {
		line, err := parseArgs(app, append([]string{"bhw-run"}, tc.in...))
		got := line.argv
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: err %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || line.help || !slices.Equal(got[1:], tc.want) {
			t.Errorf("%v → %v (%v), want %v", tc.in, got[1:], err, tc.want)
		}
	}
}

// TestParseHelp: every way of asking for help names the command asked
// about, at any depth.
func TestParseHelp(t *testing.T) {
	app := (&cliState{adapters: adapters}).app()
	cases := []struct {
		in   []string
		want string
	}{
		{[]string{"--help"}, "bhw-run"},
		{[]string{"thread", "--help"}, "bhw-run thread"},
		{[]string{"thread", "new", "--help"}, "bhw-run thread new"},
		{[]string{"thread", "new", "-h"}, "bhw-run thread new"},
		{[]string{"--help", "thread", "new"}, "bhw-run thread new"},
		{[]string{"thread", "new", "x", "--help"}, "bhw-run thread new"},
		{[]string{"help", "thread", "new"}, "bhw-run thread new"},
		{[]string{"thread", "help", "new"}, "bhw-run thread new"},
		{[]string{"help"}, "bhw-run"},
		{[]string{"policy", "explain", "--help"}, "bhw-run policy explain"},
	}
	for _, tc := range cases {
		line, err := parseArgs(app, append([]string{"bhw-run"}, tc.in...))
		if err != nil || !line.help || fullName(line.path) != tc.want {
			t.Errorf("%v → help %v of %q (%v), want the help of %q", tc.in, line.help, fullName(line.path), err, tc.want)
		}
	}
}

// TestCLIExitCodes runs the CLI in-process for invocations that end before
// any network or disk: each gets its documented exit code.
func TestCLIExitCodes(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("BLOBHUB_API_URL", "file://"+t.TempDir())
	t.Setenv("BHW_REVISION_ID", "rev_x")
	t.Setenv("BHW_SESSION_ID", "ses_x")
	cases := []struct {
		args []string
		exit int
	}{
		{[]string{"version"}, 0},
		{[]string{"--bogus"}, 64},
		{[]string{}, 64},
		{[]string{"run", "--", "../x"}, 64},
		{[]string{"a//b"}, 64},
		{[]string{"a", "b"}, 64},
		{[]string{"--log-format", "yaml", "a"}, 64},
		{[]string{"--api-url", "https://api.example.com/v1", "a"}, 78}, // no key
		{[]string{"--config", "/nonexistent/config.yaml", "a"}, 78},
	}
	for _, tc := range cases {
		var out, errOut bytes.Buffer
		if code := Main(append([]string{"bhw-run"}, tc.args...), &out, &errOut, "", adapters); code != tc.exit {
			t.Errorf("bhw-run %v: exit %d, want %d\n%s%s", tc.args, code, tc.exit, out.String(), errOut.String())
		}
	}
	// --json prints the summary with the code, even for a refused alias.
	var out, errOut bytes.Buffer
	if code := Main([]string{"bhw-run", "--json", "run", "--", "a/thread.yaml"}, &out, &errOut, "", adapters); code != 64 {
		t.Fatalf("exit %d", code)
	}
	var sum struct {
		ExitCode int `json:"exit_code"`
		Error    struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil || sum.ExitCode != 64 || sum.Error.Code != "INVALID_ALIAS" {
		t.Fatalf("summary %q: %v %+v", out.String(), err, sum)
	}
}
