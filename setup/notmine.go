package setup

import (
	"fmt"
	"slices"

	"gopkg.in/yaml.v3"
)

// notMineFile is not_mine.yaml as it is on disk: aliases, the list
// blobhub-worker's section reads (every alias in it is skipped), and
// reasons, bhw-run's own (why and when it cached each alias, which decides
// when ls looks again), which the worker ignores and drops when it writes
// the file. An alias in the list with no reason (the worker cached it) is
// checked again by ls, as a cache entry past its day is.
type notMineFile struct {
	Aliases []string                `yaml:"aliases"`
	Reasons map[string]NotMineEntry `yaml:"reasons,omitempty"`
	Extra   map[string]any          `yaml:",inline"`
}

// MarshalYAML writes the worker's list, sorted, and the reasons beside it.
func (nm NotMine) MarshalYAML() (any, error) {
	f := notMineFile{Aliases: make([]string, 0, len(nm.Aliases)), Reasons: nm.Aliases, Extra: nm.Extra}
	for alias := range nm.Aliases {
		f.Aliases = append(f.Aliases, alias)
	}
	slices.Sort(f.Aliases)
	return f, nil
}

// UnmarshalYAML reads the worker's list with bhw-run's reasons, or the
// mapping alias → reason an earlier bhw-run wrote under aliases.
func (nm *NotMine) UnmarshalYAML(n *yaml.Node) error {
	var f struct {
		Aliases yaml.Node               `yaml:"aliases"`
		Reasons map[string]NotMineEntry `yaml:"reasons"`
		Extra   map[string]any          `yaml:",inline"`
	}
	if err := n.Decode(&f); err != nil {
		return err
	}
	nm.Aliases, nm.Extra = map[string]NotMineEntry{}, f.Extra
	switch f.Aliases.Kind {
	case 0: // no aliases key
	case yaml.SequenceNode:
		var list []string
		if err := f.Aliases.Decode(&list); err != nil {
			return err
		}
		for _, alias := range list {
			nm.Aliases[alias] = f.Reasons[alias]
		}
	case yaml.MappingNode:
		if err := f.Aliases.Decode(&nm.Aliases); err != nil {
			return err
		}
	default:
		return fmt.Errorf("line %d: aliases is neither a list nor a mapping", f.Aliases.Line)
	}
	return nil
}
