package cli

import (
	"fmt"
	"time"
)

// waitFlag is `ls --wait[=MAX]`: a flag that stands alone (wait with no
// bound) or takes a duration. IsBoolFlag lets the flag parser (Go's, and
// parseArgs) take `--wait` without consuming the next word.
type waitFlag struct {
	on  bool
	max time.Duration // 0: no bound
}

func (w *waitFlag) IsBoolFlag() bool { return true }

func (w *waitFlag) Set(s string) error {
	switch s {
	case "true", "":
		w.on, w.max = true, 0
		return nil
	case "false":
		w.on, w.max = false, 0
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return fmt.Errorf("--wait=%q: give a duration such as 10m or 1h, or --wait alone to wait without a bound", s)
	}
	w.on, w.max = true, d
	return nil
}

func (w *waitFlag) String() string {
	switch {
	case w == nil || !w.on:
		return ""
	case w.max == 0:
		return "true"
	}
	return w.max.String()
}
