package accuracy

import (
	"errors"
	"math/big"
)

// errInfeasible and errUnbounded are the two ways solveStd can fail.
var (
	errInfeasible = errors.New("linear program is infeasible")
	errUnbounded  = errors.New("linear program is unbounded")
)

// solveStd solves min c·x s.t. A x = b, x >= 0 exactly, in rational
// arithmetic (math/big.Rat), with a dense two-phase tableau simplex and
// Bland's smallest-index rule (which cannot cycle). Rows with b_i < 0 are
// negated first. It is the exact LP solver behind eq. (3) and Definition 1 of
// paper 001: every float64 input is converted to a rational exactly, so the
// returned vertex is the exact optimum of the stated float64 problem; only the
// final conversion back to float64 rounds.
//
// The problems here have K+2 rows and about 2K+1 columns, so the dense
// O(m·n) pivot is cheap for any practical K (a few hundred classes).
func solveStd(A [][]big.Rat, b []big.Rat, c []big.Rat) ([]big.Rat, error) {
	m := len(A)
	n := len(c)
	N := n + m // original columns then one artificial per row
	tab := make([][]big.Rat, m)
	rhs := make([]big.Rat, m)
	basis := make([]int, m)
	for i := 0; i < m; i++ {
		tab[i] = make([]big.Rat, N)
		neg := b[i].Sign() < 0
		for j := 0; j < n; j++ {
			tab[i][j].Set(&A[i][j])
			if neg {
				tab[i][j].Neg(&tab[i][j])
			}
		}
		tab[i][n+i].SetInt64(1)
		rhs[i].Set(&b[i])
		if neg {
			rhs[i].Neg(&rhs[i])
		}
		basis[i] = n + i
	}
	// Phase 1: minimise the sum of artificials.
	cost1 := make([]big.Rat, N)
	for j := n; j < N; j++ {
		cost1[j].SetInt64(1)
	}
	if err := runSimplex(tab, rhs, basis, cost1, N); err != nil {
		return nil, err // cannot be unbounded in phase 1
	}
	var art big.Rat
	for i := 0; i < m; i++ {
		if basis[i] >= n {
			art.Add(&art, &rhs[i])
		}
	}
	if art.Sign() > 0 {
		return nil, errInfeasible
	}
	// Drive zero-level artificials out of the basis where possible; rows
	// where that is impossible are redundant and keep their artificial at 0.
	for i := 0; i < m; i++ {
		if basis[i] < n {
			continue
		}
		for j := 0; j < n; j++ {
			if tab[i][j].Sign() != 0 {
				pivot(tab, rhs, basis, i, j)
				break
			}
		}
	}
	// Phase 2: original costs; artificial columns may not enter.
	cost2 := make([]big.Rat, N)
	for j := 0; j < n; j++ {
		cost2[j].Set(&c[j])
	}
	if err := runSimplex(tab, rhs, basis, cost2, n); err != nil {
		return nil, err
	}
	x := make([]big.Rat, n)
	for i := 0; i < m; i++ {
		if basis[i] < n {
			x[basis[i]].Set(&rhs[i])
		}
	}
	return x, nil
}

// runSimplex pivots until no column j < enterLimit has a negative reduced
// cost (Bland's rule: smallest entering index, smallest leaving basis index on
// ratio ties).
func runSimplex(tab [][]big.Rat, rhs []big.Rat, basis []int, cost []big.Rat, enterLimit int) error {
	m := len(tab)
	var r, t, best, ratio big.Rat
	for {
		enter := -1
		for j := 0; j < enterLimit; j++ {
			r.Set(&cost[j])
			for i := 0; i < m; i++ {
				if tab[i][j].Sign() == 0 || cost[basis[i]].Sign() == 0 {
					continue
				}
				t.Mul(&cost[basis[i]], &tab[i][j])
				r.Sub(&r, &t)
			}
			if r.Sign() < 0 {
				enter = j
				break
			}
		}
		if enter < 0 {
			return nil
		}
		leave := -1
		for i := 0; i < m; i++ {
			if tab[i][enter].Sign() <= 0 {
				continue
			}
			ratio.Quo(&rhs[i], &tab[i][enter])
			if leave < 0 {
				best.Set(&ratio)
				leave = i
				continue
			}
			switch ratio.Cmp(&best) {
			case -1:
				best.Set(&ratio)
				leave = i
			case 0:
				if basis[i] < basis[leave] {
					leave = i
				}
			}
		}
		if leave < 0 {
			return errUnbounded
		}
		pivot(tab, rhs, basis, leave, enter)
	}
}

func pivot(tab [][]big.Rat, rhs []big.Rat, basis []int, pr, pc int) {
	var inv, f, t big.Rat
	inv.Inv(&tab[pr][pc])
	row := tab[pr]
	for j := range row {
		if row[j].Sign() != 0 {
			row[j].Mul(&row[j], &inv)
		}
	}
	rhs[pr].Mul(&rhs[pr], &inv)
	for i := range tab {
		if i == pr || tab[i][pc].Sign() == 0 {
			continue
		}
		f.Set(&tab[i][pc])
		for j := range row {
			if row[j].Sign() == 0 {
				continue
			}
			t.Mul(&f, &row[j])
			tab[i][j].Sub(&tab[i][j], &t)
		}
		t.Mul(&f, &rhs[pr])
		rhs[i].Sub(&rhs[i], &t)
	}
	basis[pr] = pc
}
