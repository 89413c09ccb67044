package check

import (
	"math"
	"sync"
)

// Student's t: how many standard errors a slope fitted from few samples
// must clear, at a one-sided level, to be growth the samples show
// (invariant 6). Over many samples it is the normal's: 2 standard errors
// at 2.3 %.

// twoSigma is the one-sided level of two standard errors of a normal.
const twoSigma = 0.02275

// tTail is P(T > x) for Student's t with dof degrees of freedom, x ≥ 0:
// a half less the density's integral from 0 to x (Simpson's rule).
func tTail(x float64, dof int) float64 {
	v := float64(dof)
	lg1, _ := math.Lgamma((v + 1) / 2)
	lg2, _ := math.Lgamma(v / 2)
	c := math.Exp(lg1-lg2) / math.Sqrt(v*math.Pi)
	pdf := func(t float64) float64 { return c * math.Pow(1+t*t/v, -(v+1)/2) }
	const n = 2000
	h := x / n
	sum := pdf(0) + pdf(x)
	for i := 1; i < n; i++ {
		w := 2.0
		if i%2 == 1 {
			w = 4
		}
		sum += w * pdf(float64(i)*h)
	}
	return 0.5 - sum*h/3
}

type tKey struct {
	p   float64
	dof int
}

var (
	tMu    sync.Mutex
	tCache = map[tKey]float64{}
)

// tCritical is the x with P(T > x) = p (0 < p < 0.5), by bisection.
func tCritical(p float64, dof int) float64 {
	if dof < 1 {
		return math.Inf(1)
	}
	tMu.Lock()
	defer tMu.Unlock()
	if x, ok := tCache[tKey{p, dof}]; ok {
		return x
	}
	x := tBisect(p, dof)
	tCache[tKey{p, dof}] = x
	return x
}

func tBisect(p float64, dof int) float64 {
	lo, hi := 0.0, 1000.0
	for range 60 {
		mid := (lo + hi) / 2
		if tTail(mid, dof) > p {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}
