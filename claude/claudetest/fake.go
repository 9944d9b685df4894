package claudetest

// MaybeRunFakeAgent is a placeholder replaced below.
func MaybeRunFakeAgent() {}
