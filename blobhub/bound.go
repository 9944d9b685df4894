package blobhub

import "context"

// A download's bound travels with its context: only the reads of an
// envelope have one (the worker object and artifacts are read whole), and
// a bound is what one call may cost, like its deadline.

type maxValueKey struct{}

// WithMaxValue bounds every download made with ctx: a value larger than
// max bytes is not read whole but refused with a *TooLargeError, so what
// the download costs does not grow with what the object holds.
func WithMaxValue(ctx context.Context, max int64) context.Context {
	return context.WithValue(ctx, maxValueKey{}, max)
}

// maxValue is the bound WithMaxValue put on ctx, 0 for none.
func maxValue(ctx context.Context) int64 {
	n, _ := ctx.Value(maxValueKey{}).(int64)
	return n
}

// answerSlack is what an answer holds besides the value (alias, ids,
// updated_at): a bounded download reads at most the bound plus this.
const answerSlack = 64 << 10
