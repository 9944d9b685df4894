package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/urfave/cli/v2"

	"github.com/blobhub/bhw-run/exit"
)

// versionInfo is what `bhw-run version --json` prints.
type versionInfo struct {
	Version string `json:"version"`
	Go      string `json:"go"`
}

func (cl *cliState) version(c *cli.Context) error {
	if c.NArg() > 0 {
		return exit.Usagef("version takes no arguments, got %q", c.Args().Slice())
	}
	return cl.result(fmt.Sprintf("bhw-run %s", cl.release), versionInfo{Version: cl.release, Go: runtime.Version()})
}

// buildVersion is this binary's version: the stamped one (main.version,
// from -ldflags), else the module
// version `go install module@version` records, else the VCS revision `go
// build` records in a checkout ("dev-<revision>", "-dirty" with local
// changes), else "dev".
func buildVersion(version string) string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	rev, dirty := "", false
	for _, kv := range bi.Settings {
		switch kv.Key {
		case "vcs.revision":
			rev = kv.Value
		case "vcs.modified":
			dirty = kv.Value == "true"
		}
	}
	if rev == "" {
		return "dev"
	}
	v := "dev-" + rev[:min(12, len(rev))]
	if dirty {
		v += "-dirty"
	}
	return v
}
