package blobhub

import (
	"fmt"
	"time"
)

// TimeLayout is the wire's timestamp: microseconds, "+00:00".
const TimeLayout = "2006-01-02T15:04:05.000000+00:00"

// FormatTime renders t in UTC as the wire's timestamp.
func FormatTime(t time.Time) string {
	return t.UTC().Truncate(time.Microsecond).Format(TimeLayout)
}

// ParseTime reads a timestamp leniently: "Z" or any offset, any number of
// fractional digits, or none.
func ParseTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("blobhub: timestamp %q is not ISO-8601", s)
}
