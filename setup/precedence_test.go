package setup

import (
	"strings"
	"testing"
)

// TestSessionPrecedence: flag > env > config. A session given by flag or
// variable wins over the config's sections (the config's own section for it
// when it has one) unless --section was given at a higher level.
func TestSessionPrecedence(t *testing.T) {
	sec := func(name, rev, ses, prefix string) Section {
		return Section{Name: name, Session: SessionTuple{OrgID: "o", BlobID: "b", RevisionID: rev, SessionID: ses}, SessionPrefix: prefix}
	}
	secs := []Section{sec("main", "rev_1", "ses_1", ""), sec("ci", "rev_2", "ses_2", "ci/"), sec("ci-other", "rev_2", "ses_2", "other/")}
	cases := []struct {
		name  string
		o     Options
		alias string
		want  string // the section's name, or the error's text
	}{
		{"config alone: by prefix", Options{}, "ci/t", "ci"},
		{"flags over the config", Options{RevisionID: "rev_9", SessionID: "ses_9"}, "ci/t", "flags"},
		{"env over the config", Options{RevisionID: "rev_9", SessionID: "ses_9", SessionFrom: FromEnv}, "ci/t", "flags"},
		{"the config's own section for the flagged session", Options{RevisionID: "rev_1", SessionID: "ses_1"}, "x", "main"},
		{"several for that session: by prefix", Options{RevisionID: "rev_2", SessionID: "ses_2"}, "other/t", "ci-other"},
		{"several for that session, no prefix matches: the whole session", Options{RevisionID: "rev_2", SessionID: "ses_2"}, "x", "flags"},
		{"--section flag over env session", Options{Section: "main", SectionFrom: FromFlag, RevisionID: "rev_9", SessionID: "ses_9", SessionFrom: FromEnv}, "ci/t", "main"},
		{"session flag over BHW_SECTION", Options{Section: "main", SectionFrom: FromEnv, RevisionID: "rev_9", SessionID: "ses_9", SessionFrom: FromFlag}, "ci/t", "flags"},
		{"both flags", Options{Section: "main", RevisionID: "rev_9", SessionID: "ses_9"}, "x", `--section "main" and --revision/--session both name the session`},
		{"both variables", Options{Section: "main", SectionFrom: FromEnv, RevisionID: "rev_9", SessionID: "ses_9", SessionFrom: FromEnv}, "x", `BHW_SECTION "main" and BHW_REVISION_ID/BHW_SESSION_ID both name`},
		{"half a session", Options{SessionID: "ses_9"}, "x", "the revision id (--revision, BHW_REVISION_ID) is missing"},
	}
	for _, tc := range cases {
		s, why, err := chooseSection(secs, tc.o, tc.alias)
		got := s.Name
		if err != nil {
			got = err.Error()
		} else if why == "" {
			t.Errorf("%s: no reason given for section %s", tc.name, s.Name)
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}
