package accuracy

import (
	"errors"
	"fmt"
	"math"
	"math/big"
)

// ErrInfeasible reports that no class mix meets the accuracy target at the
// requested load (paper 001, Definition 1 and eq. 3).
var ErrInfeasible = errors.New("infeasible")

// System is the inference system of paper 001 Sec. 2: K server classes with
// service rates Mu, accuracies A and server fractions Alpha (summing to 1).
// The paper assumes Mu decreasing and A increasing; the LP functions do not
// need that order, the policies use it only where the paper does (TAD's
// "faster first", TAD-OP's "most accurate idle class first").
type System struct {
	Mu    []float64 // service rate mu_k of one class-k server
	A     []float64 // accuracy a_k of a query served by class k
	Alpha []float64 // fraction alpha_k of the n servers in class k
}

// DefaultSystem returns the four-class system of paper 001 Sec. 3.3 and 7:
// mu=(2,1,0.9,0.1), a=(70,75,80,100), alpha_i=0.25.
func DefaultSystem() System {
	return System{
		Mu:    []float64{2, 1, 0.9, 0.1},
		A:     []float64{70, 75, 80, 100},
		Alpha: []float64{0.25, 0.25, 0.25, 0.25},
	}
}

// K returns the number of classes.
func (s System) K() int { return len(s.Mu) }

// Validate checks the system: K >= 1, equal lengths, mu_k > 0, alpha_k > 0,
// finite accuracies, and sum(alpha) = 1 within 1e-9.
func (s System) Validate() error {
	k := len(s.Mu)
	if k == 0 {
		return fmt.Errorf("mu: need at least one class: %w", ErrInvalid)
	}
	if len(s.A) != k {
		return fmt.Errorf("a: %d values for %d classes (mu has %d): %w", len(s.A), k, k, ErrInvalid)
	}
	if len(s.Alpha) != k {
		return fmt.Errorf("alpha: %d values for %d classes (mu has %d): %w", len(s.Alpha), k, k, ErrInvalid)
	}
	sum := 0.0
	for i := 0; i < k; i++ {
		if !(s.Mu[i] > 0) || math.IsInf(s.Mu[i], 0) {
			return fmt.Errorf("mu[%d] = %v: must be positive and finite: %w", i, s.Mu[i], ErrInvalid)
		}
		if math.IsNaN(s.A[i]) || math.IsInf(s.A[i], 0) {
			return fmt.Errorf("a[%d] = %v: must be finite: %w", i, s.A[i], ErrInvalid)
		}
		if !(s.Alpha[i] > 0) || math.IsInf(s.Alpha[i], 0) {
			return fmt.Errorf("alpha[%d] = %v: must be positive: %w", i, s.Alpha[i], ErrInvalid)
		}
		sum += s.Alpha[i]
	}
	if math.Abs(sum-1) > 1e-9 {
		return fmt.Errorf("alpha: sums to %v, must sum to 1: %w", sum, ErrInvalid)
	}
	return nil
}

// ErrInvalid marks invalid input parameters.
var ErrInvalid = errors.New("invalid parameter")

func checkAStar(astar float64) error {
	if math.IsNaN(astar) || math.IsInf(astar, 0) {
		return fmt.Errorf("astar = %v: must be finite: %w", astar, ErrInvalid)
	}
	return nil
}

func rat(x float64) big.Rat {
	var r big.Rat
	r.SetFloat64(x)
	return r
}

// LambdaMax returns lambda^max of paper 001 Definition 1: the largest
// normalised arrival rate for which some class mix p (p >= 0, sum p = 1,
// lambda p <= mu_alpha) has p·a >= a*. It is computed exactly as the LP
// max sum(x) s.t. 0 <= x <= mu_alpha, (a - a*)·x >= 0 with x = lambda p,
// solved by the rational simplex. It fails with ErrInfeasible when every
// class is less accurate than a* (no lambda > 0 is feasible).
func LambdaMax(s System, astar float64) (float64, error) {
	return lambdaMax(s, astar, nil)
}

// lambdaMax computes Definition 1 and, if out is not nil, stores the exact
// rational value there.
func lambdaMax(s System, astar float64, out *big.Rat) (float64, error) {
	if err := s.Validate(); err != nil {
		return 0, err
	}
	if err := checkAStar(astar); err != nil {
		return 0, err
	}
	k := s.K()
	// columns: x (k), slack s (k), surplus t (1)
	nv := 2*k + 1
	A := make([][]big.Rat, k+1)
	b := make([]big.Rat, k+1)
	for i := 0; i < k; i++ {
		A[i] = make([]big.Rat, nv)
		A[i][i].SetInt64(1)
		A[i][k+i].SetInt64(1)
		b[i] = rat(s.Alpha[i] * s.Mu[i])
	}
	A[k] = make([]big.Rat, nv)
	as := rat(astar)
	for i := 0; i < k; i++ {
		ai := rat(s.A[i])
		A[k][i].Sub(&ai, &as)
	}
	A[k][2*k].SetInt64(-1)
	c := make([]big.Rat, nv)
	for i := 0; i < k; i++ {
		c[i].SetInt64(-1)
	}
	x, err := solveStd(A, b, c)
	if err != nil {
		return 0, fmt.Errorf("lambda^max for astar=%v: %w", astar, err)
	}
	var sum big.Rat
	for i := 0; i < k; i++ {
		sum.Add(&sum, &x[i])
	}
	if out != nil {
		out.Set(&sum)
	}
	lm, _ := sum.Float64()
	if lm <= 0 {
		return 0, fmt.Errorf("astar = %v exceeds every class accuracy (max a = %v), lambda^max = 0: %w", astar, maxOf(s.A), ErrInfeasible)
	}
	return lm, nil
}

func maxOf(v []float64) float64 {
	m := math.Inf(-1)
	for _, x := range v {
		m = math.Max(m, x)
	}
	return m
}

// Solution is an optimal class mix of the LP of paper 001 eq. (3) (or of the
// relaxed LP eq. (8) when Lambda is 0 and Relaxed is set).
type Solution struct {
	Lambda  float64   // normalised arrival rate lambda
	P       []float64 // p*(lambda): the fraction of queries served by each class
	T       float64   // T_LP-LB(lambda) = p*·mu^{-1} (eq. 3)
	N       float64   // N_LP-LB(lambda) = lambda T_LP-LB(lambda) (eq. 12)
	Acc     float64   // p*·a, the lower-bound accuracy curve of Sec. 7.1
	Relaxed bool      // solved without the capacity constraints (eq. 8)
}

// SolveLP solves paper 001 eq. (3) exactly:
//
//	T_LP-LB(lambda) = min p·mu^{-1}  s.t.  lambda p <= mu_alpha, p >= 0, p·1 = 1, p·a >= a*
//
// with the rational two-phase simplex (see solveStd). A lambda above
// lambda^max fails with ErrInfeasible and names lambda^max.
func SolveLP(s System, astar, lambda float64) (Solution, error) {
	if err := s.Validate(); err != nil {
		return Solution{}, err
	}
	if err := checkAStar(astar); err != nil {
		return Solution{}, err
	}
	if !(lambda >= 0) || math.IsInf(lambda, 0) {
		return Solution{}, fmt.Errorf("lambda = %v: must be non-negative and finite: %w", lambda, ErrInvalid)
	}
	lr := rat(lambda)
	sol, err := solveLP(s, astar, &lr, true)
	if err != nil {
		if errors.Is(err, errInfeasible) {
			var lmr big.Rat
			lm, lerr := lambdaMax(s, astar, &lmr)
			if lerr != nil {
				return Solution{}, lerr
			}
			// lambda^max rounded to float64 may sit just above the exact
			// rational boundary: solve at the exact boundary instead.
			if lambda <= lm*(1+1e-12) {
				sol, err = solveLP(s, astar, &lmr, true)
				if err == nil {
					sol.Lambda = lambda
					sol.N = lambda * sol.T
					return sol, nil
				}
			}
			return Solution{}, fmt.Errorf("lambda = %v is above lambda^max = %v for astar = %v: %w", lambda, lm, astar, ErrInfeasible)
		}
		return Solution{}, err
	}
	return sol, nil
}

// SolveRelaxedLP solves the relaxed LP of paper 001 eq. (8) (eq. 3 without
// the capacity constraints lambda p <= mu_alpha) with the rational simplex.
func SolveRelaxedLP(s System, astar float64) (Solution, error) {
	if err := s.Validate(); err != nil {
		return Solution{}, err
	}
	if err := checkAStar(astar); err != nil {
		return Solution{}, err
	}
	var zero big.Rat
	sol, err := solveLP(s, astar, &zero, false)
	if err != nil {
		if errors.Is(err, errInfeasible) {
			return Solution{}, fmt.Errorf("astar = %v exceeds every class accuracy (max a = %v): %w", astar, maxOf(s.A), ErrInfeasible)
		}
		return Solution{}, err
	}
	sol.Relaxed = true
	return sol, nil
}

func solveLP(s System, astar float64, lr *big.Rat, capacity bool) (Solution, error) {
	lambda, _ := lr.Float64()
	k := s.K()
	// columns: p (k), capacity slacks (k, if capacity), accuracy surplus (1)
	nc := 0
	if capacity && lr.Sign() > 0 {
		nc = k
	}
	nv := k + nc + 1
	rows := nc + 2
	A := make([][]big.Rat, rows)
	b := make([]big.Rat, rows)
	for i := 0; i < nc; i++ {
		A[i] = make([]big.Rat, nv)
		A[i][i].Set(lr)
		A[i][k+i].SetInt64(1)
		b[i] = rat(s.Alpha[i] * s.Mu[i])
	}
	sumRow := make([]big.Rat, nv)
	accRow := make([]big.Rat, nv)
	for i := 0; i < k; i++ {
		sumRow[i].SetInt64(1)
		accRow[i] = rat(s.A[i])
	}
	accRow[nv-1].SetInt64(-1)
	A[nc], A[nc+1] = sumRow, accRow
	b[nc].SetInt64(1)
	b[nc+1] = rat(astar)
	c := make([]big.Rat, nv)
	for i := 0; i < k; i++ {
		m := rat(s.Mu[i])
		c[i].Inv(&m)
	}
	x, err := solveStd(A, b, c)
	if err != nil {
		return Solution{}, err
	}
	sol := Solution{Lambda: lambda, P: make([]float64, k)}
	var obj, t big.Rat
	for i := 0; i < k; i++ {
		sol.P[i], _ = x[i].Float64()
		t.Mul(&x[i], &c[i])
		obj.Add(&obj, &t)
		sol.Acc += sol.P[i] * s.A[i]
	}
	sol.T, _ = obj.Float64()
	sol.N = lambda * sol.T
	return sol, nil
}

// Lemma3 returns the closed-form optimum of the relaxed LP (paper 001 Lemma 3,
// eq. 9): the cheapest of the proper pairs q^{(i,j)} with a_i < a* < a_j and
// the singletons e_i with a_i >= a*. Under the paper's ordering (mu
// decreasing, a increasing) this is exactly Lemma 3 (e_i with a_i = a*, else
// the pair (i1, j1) of eq. 9); the singletons with a_i > a* only win when no
// class is below a* (e.g. a=(40,50), a*=30), a case Lemma 3 leaves implicit.
// It returns the class mix and its cost v = p·mu^{-1}.
func Lemma3(s System, astar float64) (p []float64, cost float64, err error) {
	if err := s.Validate(); err != nil {
		return nil, 0, err
	}
	if err := checkAStar(astar); err != nil {
		return nil, 0, err
	}
	k := s.K()
	best := math.Inf(1)
	bi, bj := -1, -1
	for i := 0; i < k; i++ {
		if s.A[i] >= astar {
			if c := 1 / s.Mu[i]; c < best {
				best, bi, bj = c, i, -1
			}
		}
		for j := 0; j < k; j++ {
			if s.A[i] < astar && astar < s.A[j] {
				qi := (s.A[j] - astar) / (s.A[j] - s.A[i])
				qj := (astar - s.A[i]) / (s.A[j] - s.A[i])
				if c := qi/s.Mu[i] + qj/s.Mu[j]; c < best {
					best, bi, bj = c, i, j
				}
			}
		}
	}
	if bi < 0 {
		return nil, 0, fmt.Errorf("astar = %v exceeds every class accuracy (max a = %v): %w", astar, maxOf(s.A), ErrInfeasible)
	}
	p = make([]float64, k)
	if bj < 0 {
		p[bi] = 1
	} else {
		p[bi] = (s.A[bj] - astar) / (s.A[bj] - s.A[bi])
		p[bj] = (astar - s.A[bi]) / (s.A[bj] - s.A[bi])
	}
	return p, best, nil
}
