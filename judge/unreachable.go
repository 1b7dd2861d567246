package judge

// Unreachable is the verdict on c when the after read failed for reason:
// INDETERMINATE (SOR_UNREACHABLE), class unavailable. It is what Judge
// gives on an unreachable after read, built without judging: a caller
// that has no read (an adapter that would not start) states the verdict
// by this constructor instead of calling the judge.
func Unreachable(c *Contract, reason string) Verdict {
	return judgeFrame(c, readState{}, readState{reason: reason}, Options{}, func() Verdict {
		panic("judge: Unreachable judged a read")
	})
}
