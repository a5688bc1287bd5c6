package dmcrypt

import "sync"

// sectorLocks orders writes that touch the same sectors. Whole-sector
// writes take their sectors shared: they never read, so they cannot tear a
// sector whatever else runs. A read-modify-write of a partial sector takes
// its sectors exclusive, so no other write lands between its read and its
// write. Sectors map onto a fixed set of stripes (sector mod len), locked in
// ascending stripe order, so there is no global lock and no deadlock.
type sectorLocks struct {
	stripes [lockStripes]sync.RWMutex
}

const lockStripes = 256

// lock locks the sectors first..last (inclusive, in units of the volume's
// sectors) and returns the function that unlocks them.
func (l *sectorLocks) lock(first, last int64, exclusive bool) func() {
	lo, hi, wrapHi := l.span(first, last)
	for i := 0; i <= wrapHi; i++ {
		l.lockOne(i, exclusive)
	}
	for i := lo; i <= hi; i++ {
		l.lockOne(i, exclusive)
	}
	return func() {
		for i := lo; i <= hi; i++ {
			l.unlockOne(i, exclusive)
		}
		for i := 0; i <= wrapHi; i++ {
			l.unlockOne(i, exclusive)
		}
	}
}

// span returns the stripes of first..last as the ascending run lo..hi plus
// the run 0..wrapHi where the range wraps past the last stripe (wrapHi = -1
// when it does not).
func (l *sectorLocks) span(first, last int64) (lo, hi, wrapHi int) {
	if last-first+1 >= lockStripes {
		return 0, lockStripes - 1, -1
	}
	lo = int(first % lockStripes)
	end := lo + int(last-first)
	if end < lockStripes {
		return lo, end, -1
	}
	return lo, lockStripes - 1, end - lockStripes
}

func (l *sectorLocks) lockOne(i int, exclusive bool) {
	if exclusive {
		l.stripes[i].Lock()
	} else {
		l.stripes[i].RLock()
	}
}

func (l *sectorLocks) unlockOne(i int, exclusive bool) {
	if exclusive {
		l.stripes[i].Unlock()
	} else {
		l.stripes[i].RUnlock()
	}
}
