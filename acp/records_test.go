package acp

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/blobhub/bhw-run/agent"
	"github.com/blobhub/bhw-run/agent/agenttest"
)

// TestHomeRecordsFollowNothing: what bhw-run writes in an ACP agent's home
// at every start (Gemini CLI's and Qwen Code's settings, OpenCode's config
// folder) replaces a link the agent planted there rather than writing
// through it, and a folder it turned into a link fails the start; the
// record of when a session was created is kept in the state tree, so a
// link, a pipe or a sparse file the agent left at its old place in the
// home is neither followed, waited on nor read. secret stands for
// ~/.blobhub.
func TestHomeRecordsFollowNothing(t *testing.T) {
	script := agenttest.Script{Turns: [][]agenttest.Step{{{Text: "one"}}, {{Text: "two"}}}}
	for _, c := range []struct{ typ, file, folder string }{
		{TypeGemini, ".gemini/settings.json", ".gemini"},
		{TypeGemini, ".gemini/policies/bhw-run.toml", ".gemini/policies"},
		{TypeQwen, "settings.json", ""},
		{TypeOpenCode, "config/opencode/package.json", "config/opencode"},
	} {
		t.Run(c.typ+"/"+c.file, func(t *testing.T) {
			skipMinute(t)
			secret := t.TempDir()
			cred := filepath.Join(secret, "credentials.yaml")
			if err := os.WriteFile(cred, []byte("key\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			home := t.TempDir()
			plant := func(rel, target string) {
				t.Helper()
				p := filepath.Join(home, rel)
				_ = os.RemoveAll(p)
				if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(target, p); err != nil {
					t.Fatal(err)
				}
			}
			secretIntact := func() {
				t.Helper()
				if b, _ := os.ReadFile(cred); string(b) != "key\n" {
					t.Fatalf("credentials.yaml is now %q", b)
				}
				if entries, _ := os.ReadDir(secret); len(entries) != 1 {
					t.Fatalf("the secret folder holds %d entries", len(entries))
				}
			}
			plant(c.file, cred)
			// The old place of the session records, linked to the secret
			// folder: a session named credentials.yaml was written there.
			plant(".bhw-run-sessions", secret)
			first := startFake(t, c.typ, script, func(l *agent.Launch) { l.Home = home })
			secretIntact()
			if fi, err := os.Lstat(filepath.Join(home, c.file)); err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("%s after the start: %v, want the settings as a regular file", c.file, err)
			}
			id := first.s.SessionID()
			closeNow(t, first.s)

			// The resume: a pipe and a sparse file where the record was.
			sessions := filepath.Join(home, ".bhw-run-sessions")
			_ = os.Remove(sessions)
			if err := os.MkdirAll(sessions, 0o700); err != nil {
				t.Fatal(err)
			}
			if safeName(id) {
				if err := syscall.Mkfifo(filepath.Join(sessions, id), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if c.folder != "" {
				plant(c.folder, secret)
			}
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			l := fakeLaunch(t, c.typ, script)
			l.Home, l.CacheDir, l.SessionID, l.Resume = home, first.l.CacheDir, id, true
			done := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				s, err := start(ctx, presetOf(t, c.typ), l)
				if err == nil {
					shortGraces(s)
					closeNow(t, s)
				}
				done <- err
			}()
			select {
			case err := <-done:
				// A folder of its settings turned into a link fails the
				// start, saying so; with none, it resumes.
				if c.folder != "" && err == nil {
					t.Errorf("the start went on through the linked folder %s", c.folder)
				}
				if c.folder == "" && err != nil {
					t.Errorf("resume: %v", err)
				}
			case <-time.After(45 * time.Second):
				// Let the blocked read go, then fail.
				if f, err := os.OpenFile(filepath.Join(sessions, id), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					f.Close()
				}
				t.Fatal("the resume hung on the pipe in the agent's home")
			}
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
				t.Errorf("the resume allocated %d MiB", grew>>20)
			}
			secretIntact()
		})
	}
}

// TestSessionRecordBounded: a creation record that is a pipe or a 256 MiB
// sparse file (in the state tree, which only a person could do) is read
// as unknown, without waiting or allocating.
func TestSessionRecordBounded(t *testing.T) {
	cache := t.TempDir()
	dir := filepath.Join(cache, sessionsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(256 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, id := range []string{"pipe", "sparse"} {
		if got := sessionCreated(cache, id); !got.IsZero() {
			t.Errorf("%s: %v", id, got)
		}
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
		t.Errorf("allocated %d MiB", grew>>20)
	}
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	if err := recordCreated(cache, "s1", at); err != nil || !sessionCreated(cache, "s1").Equal(at) {
		t.Errorf("recorded %v, read %v", err, sessionCreated(cache, "s1"))
	}
}
