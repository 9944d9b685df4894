package e2e

import (
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
	if _, checks := e.doctor(bhtest.RunnerKey); !checks["confine"].OK || !strings.Contains(checks["confine"].Detail, "Landlock ABI") {
		t.Errorf("confine: %+v, want it to hold naming the ABI", checks["confine"])
	}
	code, checks := e.doctor(bhtest.RunnerKey, confine.NoLandlockEnv+"=1")
	wantFailed(t, code, checks, "confine", exit.CodeConfinementUnavailable, "confine.mode: off")
	onlyFailed(t, checks, "confine")

	e.Config.Confine.Mode = "off"
	e.writeConfig()
	if code, checks := e.doctor(bhtest.RunnerKey, confine.NoLandlockEnv+"=1"); code != 0 || !strings.Contains(checks["confine"].Detail, "unconfined") {
		t.Errorf("doctor exit %d, confine %+v; want 0 and the agents unconfined", code, checks["confine"])
	}
}
