package setup

import (
	"time"

	"github.com/blobhub/bhw-run/exit"
)

// Discovery is config.yaml's discovery block: how `ls --runnable` follows
// the session's change feed (docs/operating.md, Discovery). Both are Go
// durations ("1.5s", "10m", "1h").
type Discovery struct {
	// PollInterval is the wait between two looks at the feed of `ls
	// --runnable --wait` (default 1.5s, the daemon's idle interval).
	PollInterval string `yaml:"poll_interval"`
	// FullListingEvery is how old the last full listing may get before a
	// pass lists every object again instead of reading the feed (default
	// 1h); 0 lists every object on every pass, without the feed.
	FullListingEvery string `yaml:"full_listing_every"`

	poll, full time.Duration
}

// The defaults of the discovery block.
const (
	DefaultPollInterval     = 1500 * time.Millisecond
	DefaultFullListingEvery = time.Hour
)

// Validate reads the durations, with their defaults.
func (d *Discovery) Validate() error {
	read := func(key, s string, def time.Duration, min time.Duration) (time.Duration, error) {
		if s == "" {
			return def, nil
		}
		v, err := time.ParseDuration(s)
		if err != nil || v < min {
			return 0, exit.Errorf(exit.CodeInvalidConfig, "discovery.%s is %q; give a duration of at least %v, such as 1.5s, 10m or 1h", key, s, min)
		}
		return v, nil
	}
	var err error
	if d.poll, err = read("poll_interval", d.PollInterval, DefaultPollInterval, 10*time.Millisecond); err != nil {
		return err
	}
	d.full, err = read("full_listing_every", d.FullListingEvery, DefaultFullListingEvery, 0)
	return err
}

// Poll is the interval of `ls --wait`.
func (d Discovery) Poll() time.Duration {
	if d.poll <= 0 {
		return DefaultPollInterval
	}
	return d.poll
}

// FullEvery is the safety net's interval; 0 turns the feed off.
func (d Discovery) FullEvery() time.Duration {
	if d.poll == 0 && d.FullListingEvery == "" {
		return DefaultFullListingEvery // not validated: a Setup made by hand
	}
	return d.full
}
