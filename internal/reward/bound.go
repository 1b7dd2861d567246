package reward

import "math"

// ClopperPearsonUpper is the exact one-sided Clopper–Pearson upper bound on
// a false-accept probability after k false accepts in n trials, at
// confidence 1 − delta: the smallest p with P[Bin(n, p) ≤ k] ≤ delta.
//
// For k = 0 that is 1 − delta^(1/n) in closed form. Otherwise the binomial
// CDF, which falls strictly as p grows, is inverted by bisection on the
// exact sum (never a normal approximation); 200 halvings leave an interval
// far below float64 resolution. k ≥ n gives 1.
func ClopperPearsonUpper(k, n int, delta float64) float64 {
	switch {
	case n <= 0 || k >= n:
		return 1
	case k <= 0:
		return 1 - math.Pow(delta, 1/float64(n))
	}
	lo, hi := 0.0, 1.0
	for range 200 {
		mid := (lo + hi) / 2
		if BinomialCDF(k, n, mid) > delta {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// BinomialCDF is P[Bin(n, p) ≤ k], summed term by term in log space.
func BinomialCDF(k, n int, p float64) float64 {
	switch {
	case k < 0:
		return 0
	case k >= n || p <= 0:
		return 1
	case p >= 1:
		return 0
	}
	lp, lq := math.Log(p), math.Log1p(-p)
	ln, _ := math.Lgamma(float64(n + 1))
	var sum float64
	for i := 0; i <= k; i++ {
		li, _ := math.Lgamma(float64(i + 1))
		lni, _ := math.Lgamma(float64(n - i + 1))
		sum += math.Exp(ln - li - lni + float64(i)*lp + float64(n-i)*lq)
	}
	return math.Min(sum, 1)
}
