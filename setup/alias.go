package setup

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ThreadHomeDir is the folder of a thread's folder that holds the home of
// an agent that asks for one of its own (agent.Adapter.ThreadHome).
const ThreadHomeDir = "agent-home"

// reserved are the names of a thread folder's own files and folders; no
// alias segment may take one, so no alias can reach another thread's
// files (a thread "a/agent-home" would live inside a's agent home).
var reserved = map[string]bool{"thread.yaml": true, "thread.lock": true, "thread.log": true, "emissions.jsonl": true, "artifacts.yaml": true, ThreadHomeDir: true}

// ValidateAlias checks a thread alias before anything touches disk or
// network: it becomes nested folders of the state tree. The error names the
// rule that failed.
func ValidateAlias(alias string) error {
	switch {
	case alias == "":
		return errors.New("the alias is empty")
	case len(alias) > 512:
		return fmt.Errorf("the alias is %d bytes; at most 512 are allowed", len(alias))
	case !utf8.ValidString(alias):
		return errors.New("the alias is not valid UTF-8")
	case strings.HasPrefix(alias, "/"):
		return errors.New("the alias must not begin with /")
	case strings.HasPrefix(alias, "-"):
		return errors.New("the alias must not begin with - (use `bhw-run run -- <alias>` only for aliases that are valid)")
	}
	for _, r := range alias {
		if r == 0 || unicode.IsControl(r) {
			return fmt.Errorf("the alias contains a control character (%U)", r)
		}
	}
	for _, seg := range strings.Split(alias, "/") {
		if err := validateSegment(seg); err != nil {
			return err
		}
	}
	return nil
}

func validateSegment(seg string) error {
	switch {
	case seg == "":
		return errors.New("the alias has an empty segment (// or a trailing /)")
	case seg == "." || seg == "..":
		return fmt.Errorf("the alias has a %q segment", seg)
	case len(seg) > 255:
		return fmt.Errorf("an alias segment is %d bytes; at most 255 are allowed", len(seg))
	case reserved[seg]:
		return fmt.Errorf("the alias segment %q is a reserved name of the state tree", seg)
	}
	return nil
}

// ValidateName checks a profile name or session id that becomes one
// directory name: the rules of one alias segment, and no "/".
func ValidateName(s string) error {
	if strings.Contains(s, "/") {
		return errors.New("must not contain /")
	}
	if strings.HasPrefix(s, "-") {
		return errors.New("must not begin with -")
	}
	if err := ValidateAlias(s); err != nil {
		return err
	}
	return nil
}

// ThreadDir is the folder of a thread in the state tree: one directory per
// "/"-separated alias segment.
func ThreadDir(jobDir, alias string) string {
	return filepath.Join(append([]string{jobDir, "threads"}, strings.Split(alias, "/")...)...)
}
