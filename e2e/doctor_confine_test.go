package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/blobhub/bhtest"
	"github.com/blobhub/bhw-run/confine"
	"github.com/blobhub/bhw-run/exit"
)

// TestDoctorConfine: the doctor's confine line holds on this kernel, fails
// with CONFINEMENT_UNAVAILABLE and the fix on one without Landlock, and
// holds again once the machine owner turned the confinement off.
func TestDoctorConfine(t *testing.T) {
	e := doctorEnv(t)
	abi := fmt.Sprintf("Landlock ABI %d in force", confine.ABI())
	if _, checks := e.doctor(bhtest.RunnerKey); !checks["confine"].OK || !strings.Contains(checks["confine"].Detail, abi) ||
		!strings.Contains(checks["confine"].Detail, confine.Scopes(confine.ABI())) {
		t.Errorf("confine: %+v, want it to hold naming the ABI in force and its scopes", checks["confine"])
	}
	code, checks := e.doctor(bhtest.RunnerKey, confine.NoLandlockEnv+"=1")
	wantFailed(t, code, checks, "confine", exit.CodeConfinementUnavailable, "confine.mode: off")
	// The agent is not started for its version either: it cannot be
	// confined (TestDoctorVersionConfined).
	onlyFailed(t, checks, "confine", "agent claude_code")

	e.Config.Confine.Mode = "off"
	e.writeConfig()
	if code, checks := e.doctor(bhtest.RunnerKey, confine.NoLandlockEnv+"=1"); code != 0 || !strings.Contains(checks["confine"].Detail, "unconfined") {
		t.Errorf("doctor exit %d, confine %+v; want 0 and the agents unconfined", code, checks["confine"])
	}
}

// TestDoctorVersionConfined: the doctor starts the agent's executable for
// its version confined, as a run does: an executable an agent could have
// rewritten reads none of bhw-run's records at the owner's next doctor.
// On a kernel without Landlock it is not started at all.
func TestDoctorVersionConfined(t *testing.T) {
	e := doctorEnv(t)
	script := fmt.Sprintf("#!/bin/sh\nif cat %s >/dev/null 2>&1; then echo read-the-state-tree 1.0; else echo kept-out 1.0; fi\n", filepath.Join(e.state, "config.yaml"))
	e.scriptAgent(claudeType, "claude", script, 0o755)
	if _, checks := e.doctor(bhtest.RunnerKey); !checks["agent claude_code"].OK || !strings.Contains(checks["agent claude_code"].Detail, "kept-out 1.0") {
		t.Errorf("agent claude_code: %+v, want the version probe kept out of the state tree", checks["agent claude_code"])
	}
	code, checks := e.doctor(bhtest.RunnerKey, confine.NoLandlockEnv+"=1")
	wantFailed(t, code, checks, "agent claude_code", "cannot be confined", "--version")
	if strings.Contains(checks["agent claude_code"].Detail, "1.0") {
		t.Errorf("agent claude_code: %+v: started unconfined", checks["agent claude_code"])
	}
	// With the confinement off by the machine owner, it runs as it is.
	e.Config.Confine.Mode = "off"
	e.writeConfig()
	if _, checks := e.doctor(bhtest.RunnerKey); !strings.Contains(checks["agent claude_code"].Detail, "read-the-state-tree 1.0") {
		t.Errorf("agent claude_code unconfined: %+v", checks["agent claude_code"])
	}
}
