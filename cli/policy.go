package cli

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/blobhub/bhw-run/redact"
	"github.com/blobhub/bhw-run/run"
)

func (cl *cliState) explain(c *cli.Context) error {
	alias, setup, bh, err := cl.open(c, 1, false)
	if err != nil {
		return err
	}
	r := &run.Runner{Setup: setup, Client: bh, Logger: cl.log}
	ex, err := r.Explain(c.Context, alias, c.String("effect"), c.String("command"), c.String("path"))
	if err != nil {
		return noThreadWhere(err, setup)
	}
	return cl.result(redact.ShownText(strings.TrimSuffix(ex.Text(), "\n")), ex)
}
