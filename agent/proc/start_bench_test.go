package proc

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/blobhub/bhw-run/confine"
)

// BenchmarkAgentStart is one agent start and its end as Start and Close
// do them, for /bin/true: unconfined, and confined by a rule set of a
// home with a state tree denied. It measures what the process layer adds
// to an agent's own start (docs/processes.md reports it before and after
// the supervisor).
func BenchmarkAgentStart(b *testing.B) {
	run := func(b *testing.B, rules *confine.Rules) {
		for b.Loop() {
			p, err := Start(Config{Path: "/bin/true", Dir: b.TempDir(), Env: []string{}, Confine: rules})
			if err != nil {
				b.Fatal(err)
			}
			<-p.Done()
			_ = p.Close(context.Background())
		}
	}
	b.Run("Unconfined", func(b *testing.B) { run(b, nil) })
	b.Run("Confined", func(b *testing.B) {
		if confine.ABI() == 0 {
			b.Skip("this kernel has no Landlock")
		}
		home, err := os.UserHomeDir()
		if err != nil {
			b.Fatal(err)
		}
		rules, err := confine.Build(confine.Spec{WorkFolder: b.TempDir(), Temp: b.TempDir(),
			Deny: []string{filepath.Join(home, ".blobhub"), filepath.Join(home, ".blobhub-worker")}})
		if err != nil {
			b.Fatal(err)
		}
		run(b, &rules)
	})
}
