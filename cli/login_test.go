package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/setup"
)

// loginEnv is a HOME of the test's own and a BlobHub to log in to.
type loginEnv struct {
	t    *testing.T
	home string
	srv  *bhtest.Server
}

func newLoginEnv(t *testing.T) *loginEnv {
	home := filepath.Join(t.TempDir(), "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	return &loginEnv{t: t, home: home, srv: bhtest.New(t)}
}

// main runs bhw-run with args, piped the text on stdin.
func (e *loginEnv) main(piped string, args ...string) (code int, stdout, stderr string) {
	e.t.Helper()
	old := stdin
	stdin = strings.NewReader(piped)
	defer func() { stdin = old }()
	var out, errOut bytes.Buffer
	code = Main(append([]string{"bhw-run", "--log-format", "json"}, args...), &out, &errOut, "", adapters)
	return code, out.String(), errOut.String()
}

// creds is the credentials file as written.
func (e *loginEnv) creds() (map[string]any, os.FileMode) {
	e.t.Helper()
	path := setup.CredentialsPath(e.home)
	fi, err := os.Stat(path)
	if err != nil {
		e.t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		e.t.Fatal(err)
	}
	return doc, fi.Mode().Perm()
}

// login, whoami and profile ls are blobhub-worker's words: login stores
// the key as a profile of the shared file (0600; the first profile the
// default, a later one leaves it), whoami says whose the key is, and
// profile ls lists them. Before, each was an alias: exit 66.
func TestLoginWhoamiProfileLs(t *testing.T) {
	e := newLoginEnv(t)
	code, out, errOut := e.main(bhtest.RunnerKey+"\n", "login", "--profile", "prod", "--api-key-stdin", "--api-url", e.srv.URL())
	if code != 0 || !strings.Contains(out, "Logged in as Runner Test (usr_runner), profile \"prod\"") {
		t.Fatalf("login: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if strings.Contains(out+errOut, bhtest.RunnerKey) {
		t.Errorf("login printed the key: %q %q", out, errOut)
	}
	doc, mode := e.creds()
	if mode != 0o600 {
		t.Errorf("credentials mode %04o, want 0600", mode)
	}
	prod := doc["profiles"].(map[string]any)["prod"].(map[string]any)
	if doc["default"] != "prod" || prod["key"] != bhtest.RunnerKey || prod["url"] != e.srv.URL() {
		t.Errorf("credentials %v", doc)
	}
	if _, err := os.Stat(filepath.Join(e.home, ".blobhub-worker", "profiles", "prod", "identity.yaml")); err != nil {
		t.Errorf("the profile's identity.yaml: %v", err)
	}

	t.Setenv("PERSON_KEY", bhtest.PersonKey)
	if code, out, errOut := e.main("", "login", "--profile", "staging", "--api-key-env", "PERSON_KEY", "--api-url", e.srv.URL(), "--json"); code != 0 || !strings.Contains(out, `"user_id":"usr_person"`) {
		t.Fatalf("login --api-key-env: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if doc, _ := e.creds(); doc["default"] != "prod" {
		t.Errorf("a second login moved the default: %v", doc["default"])
	}

	code, out, errOut = e.main("", "whoami")
	for _, want := range []string{"Profile: prod", "User: Runner Test (usr_runner)", "State: " + filepath.Join(e.home, ".blobhub-worker", "profiles", "prod"), "Running: no"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("whoami: exit %d, stdout %q (want %q), stderr %q", code, out, want, errOut)
		}
	}
	if code, out, _ := e.main("", "--profile", "staging", "whoami"); code != 0 || !strings.Contains(out, "User: Person Test (usr_person)") {
		t.Errorf("whoami --profile staging: exit %d, %q", code, out)
	}
	code, out, errOut = e.main("", "profile", "ls")
	want := "* prod (" + e.srv.URL() + ") [state]\n  staging (" + e.srv.URL() + ") [state]\n"
	if code != 0 || out != want {
		t.Errorf("profile ls: exit %d, stdout %q, want %q (stderr %q)", code, out, want, errOut)
	}
}

// The key of another user under a profile whose state tree recorded the
// first is refused (77) and the file is kept; --force records the new one.
func TestLoginGuardsTheRecordedUser(t *testing.T) {
	e := newLoginEnv(t)
	if code, _, errOut := e.main(bhtest.RunnerKey, "login", "--api-key-stdin", "--api-url", e.srv.URL()); code != 0 {
		t.Fatalf("login: exit %d: %s", code, errOut)
	}
	before, _ := os.ReadFile(setup.CredentialsPath(e.home))
	code, _, errOut := e.main(bhtest.PersonKey, "login", "--api-key-stdin", "--api-url", e.srv.URL())
	if code != 77 || !strings.Contains(errOut, "USER_IDENTITY_MISMATCH") || !strings.Contains(errOut, "--force") {
		t.Fatalf("another user's key: exit %d, stderr %q; want 77 naming --force", code, errOut)
	}
	if after, _ := os.ReadFile(setup.CredentialsPath(e.home)); !bytes.Equal(before, after) {
		t.Errorf("a refused login changed the file:\n%s", after)
	}
	if code, out, errOut := e.main(bhtest.PersonKey, "login", "--api-key-stdin", "--api-url", e.srv.URL(), "--force"); code != 0 || !strings.Contains(out, "usr_person") {
		t.Fatalf("login --force: exit %d, %q %q", code, out, errOut)
	}
}

// Each way of giving login too little or too much is a usage error that
// names the fix, and writes nothing.
func TestLoginRefusesBadSources(t *testing.T) {
	e := newLoginEnv(t)
	t.Setenv("EMPTY_KEY", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"login", "--api-url", e.srv.URL()}, "--api-key-stdin"},
		{[]string{"login", "--api-key", "bhk_x", "--api-key-stdin"}, "--api-key and --api-key-stdin both name a source"},
		{[]string{"login", "--api-key-env", "EMPTY_KEY"}, "EMPTY_KEY, which is unset or empty"},
		{[]string{"login", "--api-key-stdin", "--api-url-stdin"}, "only one value can come from stdin"},
		{[]string{"login", "--profile", "../evil", "--api-key-stdin"}, "is not a profile name"},
	} {
		code, _, errOut := e.main("bhk_x", tc.args...)
		if code != 64 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 64 saying %q", tc.args, code, errOut, tc.want)
		}
	}
	if _, err := os.Stat(setup.CredentialsPath(e.home)); err == nil {
		t.Error("a refused login wrote the credentials file")
	}
	code, _, errOut := e.main(bhtest.RunnerKey+"x", "login", "--api-key-stdin", "--api-url", e.srv.URL())
	if code != 77 || !strings.Contains(errOut, "AUTH_INVALID") {
		t.Errorf("a refused key: exit %d, stderr %q; want 77 AUTH_INVALID", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(e.home, ".blobhub-worker")); err == nil {
		t.Error("a refused key made a state tree")
	}
}
