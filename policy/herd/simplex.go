package herd

import (
	"errors"
	"math"
)

var (
	errLPInfeasible = errors.New("herd: LP infeasible")
	errLPUnbounded  = errors.New("herd: LP unbounded")
	errLPIterations = errors.New("herd: LP iteration limit")
)

const lpEps = 1e-9

// solveLP minimises c.x subject to a x = b, x >= 0, with b >= 0, by a dense
// two-phase tableau simplex: unit columns already in a (the slacks) start
// the basis, artificial variables cover the other rows; Dantzig's rule with
// a switch to Bland's rule after a run of non-improving pivots (which
// prevents cycling). It replaced gonum's lp.Simplex inside the
// branch-and-bound because that one refactorises the basis every iteration
// and took ~0.1-0.5 s per relaxation at our sizes; TestSolveLPMatchesGonum
// checks both agree.
func solveLP(c []float64, a [][]float64, b []float64) (float64, []float64, error) {
	m, n := len(a), len(c)
	basis := make([]int, m)
	for r := range basis {
		basis[r] = -1
	}
	// unit columns
	for j := 0; j < n; j++ {
		row, ok := -1, true
		for r := 0; r < m && ok; r++ {
			switch v := a[r][j]; {
			case v == 0:
			case v == 1 && row < 0:
				row = r
			default:
				ok = false
			}
		}
		if ok && row >= 0 && basis[row] < 0 {
			basis[row] = j
		}
	}
	var artRows []int
	for r := range basis {
		if basis[r] < 0 {
			artRows = append(artRows, r)
		}
	}
	k := len(artRows)
	w := n + k + 1
	t := make([][]float64, m+1)
	for r := 0; r < m; r++ {
		t[r] = make([]float64, w)
		copy(t[r], a[r])
		t[r][w-1] = b[r]
	}
	for i, r := range artRows {
		t[r][n+i] = 1
		basis[r] = n + i
	}
	obj := make([]float64, w)
	t[m] = obj
	dead := make([]bool, m)
	// phase I: minimise the sum of artificials
	if k > 0 {
		for j := range obj {
			obj[j] = 0
		}
		for i := 0; i < k; i++ {
			obj[n+i] = 1
		}
		for _, r := range artRows { // price out the artificial basics
			for j := 0; j < w; j++ {
				obj[j] -= t[r][j]
			}
		}
		if err := simplexIterate(t, basis, dead, n+k, w); err != nil {
			return 0, nil, err
		}
		if -obj[w-1] > 1e-7*math.Max(1, maxAbs(b)) {
			return 0, nil, errLPInfeasible
		}
		// drive remaining (zero-valued) artificials out of the basis
		for r := 0; r < m; r++ {
			if basis[r] < n {
				continue
			}
			piv := -1
			for j := 0; j < n; j++ {
				if math.Abs(t[r][j]) > 1e-7 {
					piv = j
					break
				}
			}
			if piv < 0 {
				dead[r] = true // redundant row
				continue
			}
			pivot(t, basis, r, piv, w)
		}
	}
	// phase II
	for j := range obj {
		obj[j] = 0
	}
	copy(obj, c)
	for r := 0; r < m; r++ {
		if dead[r] || basis[r] >= n {
			continue
		}
		cb := c[basis[r]]
		if cb == 0 {
			continue
		}
		for j := 0; j < w; j++ {
			obj[j] -= cb * t[r][j]
		}
	}
	if err := simplexIterate(t, basis, dead, n, w); err != nil {
		return 0, nil, err
	}
	x := make([]float64, n)
	for r := 0; r < m; r++ {
		if !dead[r] && basis[r] < n {
			x[basis[r]] = t[r][w-1]
		}
	}
	val := 0.0
	for j := range c {
		val += c[j] * x[j]
	}
	return val, x, nil
}

// simplexIterate pivots until no column < ncols has a negative reduced cost.
func simplexIterate(t [][]float64, basis []int, dead []bool, ncols, w int) error {
	m := len(basis)
	obj := t[m]
	stall := 0
	bland := false
	last := math.Inf(1)
	for it := 0; it < 50000; it++ {
		enter := -1
		best := -lpEps
		for j := 0; j < ncols; j++ {
			if obj[j] < best {
				enter = j
				if bland {
					break
				}
				best = obj[j]
			}
		}
		if enter < 0 {
			return nil
		}
		leave := -1
		ratio := math.Inf(1)
		for r := 0; r < m; r++ {
			if dead[r] {
				continue
			}
			if v := t[r][enter]; v > lpEps {
				q := t[r][w-1] / v
				if q < ratio-1e-12 || (q <= ratio+1e-12 && leave >= 0 && basis[r] < basis[leave]) {
					ratio, leave = q, r
				}
			}
		}
		if leave < 0 {
			return errLPUnbounded
		}
		pivot(t, basis, leave, enter, w)
		if v := -obj[w-1]; v < last-1e-12 {
			last, stall = v, 0
		} else if stall++; stall > 2*m+10 {
			bland = true
		}
	}
	return errLPIterations
}

func pivot(t [][]float64, basis []int, r, j, w int) {
	pr := t[r]
	inv := 1 / pr[j]
	for x := 0; x < w; x++ {
		pr[x] *= inv
	}
	pr[j] = 1
	for i := range t {
		if i == r {
			continue
		}
		f := t[i][j]
		if f == 0 {
			continue
		}
		row := t[i]
		for x := 0; x < w; x++ {
			row[x] -= f * pr[x]
		}
		row[j] = 0
	}
	basis[r] = j
}

func maxAbs(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = math.Max(m, math.Abs(x))
	}
	return m
}
