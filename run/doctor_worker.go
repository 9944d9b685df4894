package run

import "strings"

// configWorkerKeys names what config.yaml holds for blobhub-worker that a
// one-shot run reads and does not use, and fails on policy.rules in
// bhw-run's older spelling: the worker reads such a rule wider (its
// {effect: write, path, decision: deny} is an allow-every-write rule there).
func (d *doctor) configWorkerKeys() {
	s := d.s
	if len(s.Ignored) > 0 {
		d.ok("config_worker_keys", "read and not used by bhw-run (blobhub-worker's daemon features): %s", strings.Join(s.Ignored, ", "))
	}
	if len(s.PolicyNotes) > 0 {
		d.fail("config_policy", "policy.rules are in bhw-run's older spelling, which blobhub-worker reads wider: "+strings.Join(s.PolicyNotes, "; "),
			"rewrite them in "+s.ConfigPath+" as {id, effect, action, command: [globs], outside} (docs/configuration.md, Policy)")
	}
}
