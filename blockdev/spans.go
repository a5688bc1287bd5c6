package blockdev

import "sort"

// span is the byte range [start, end).
type span struct{ start, end int64 }

// spanSet is a set of byte ranges kept as sorted, disjoint spans; touching
// spans are merged. The zero value is empty. It is not safe for concurrent
// use.
type spanSet struct{ s []span }

// first returns the index of the first span that ends at or after start
// (spans ending exactly at start touch it and merge).
func (ss *spanSet) first(start int64) int {
	return sort.Search(len(ss.s), func(i int) bool { return ss.s[i].end >= start })
}

// add puts [start, end) into the set.
func (ss *spanSet) add(start, end int64) {
	if start >= end {
		return
	}
	i := ss.first(start)
	j := i
	for j < len(ss.s) && ss.s[j].start <= end {
		start = min(start, ss.s[j].start)
		end = max(end, ss.s[j].end)
		j++
	}
	if i == j {
		ss.s = append(ss.s, span{})
		copy(ss.s[i+1:], ss.s[i:])
		ss.s[i] = span{start, end}
		return
	}
	ss.s[i] = span{start, end}
	ss.s = append(ss.s[:i+1], ss.s[j:]...)
}

// remove takes [start, end) out of the set.
func (ss *spanSet) remove(start, end int64) {
	if start >= end {
		return
	}
	i := sort.Search(len(ss.s), func(i int) bool { return ss.s[i].end > start })
	if i == len(ss.s) || ss.s[i].start >= end {
		return
	}
	var keep []span
	if ss.s[i].start < start {
		keep = append(keep, span{ss.s[i].start, start})
	}
	j := i
	for j < len(ss.s) && ss.s[j].start < end {
		j++
	}
	if last := ss.s[j-1]; last.end > end {
		keep = append(keep, span{end, last.end})
	}
	rest := append(keep, ss.s[j:]...)
	ss.s = append(ss.s[:i], rest...)
}

// overlaps reports whether any byte of [start, end) is in the set.
func (ss *spanSet) overlaps(start, end int64) bool {
	i := sort.Search(len(ss.s), func(i int) bool { return ss.s[i].end > start })
	return i < len(ss.s) && ss.s[i].start < end
}

// addAll puts every span of o into the set.
func (ss *spanSet) addAll(o []span) {
	for _, sp := range o {
		ss.add(sp.start, sp.end)
	}
}

// bytes returns the number of bytes in the set.
func (ss *spanSet) bytes() int64 {
	var n int64
	for _, sp := range ss.s {
		n += sp.end - sp.start
	}
	return n
}

func (ss *spanSet) len() int { return len(ss.s) }

// take empties the set and returns what it held.
func (ss *spanSet) take() []span {
	s := ss.s
	ss.s = nil
	return s
}
