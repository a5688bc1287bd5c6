package devtest

import "fmt"

// PowerCuts calls fn with every image a power cut may leave of a device
// that held before and then received the recorded operations, on a drive
// that keeps flushed writes and may have persisted any subset of the
// writes issued since the last flush (drives reorder them). For each run of
// writes between flushes (an epoch), the earlier epochs are applied whole
// and then each subset of the epoch's writes, in issue order: every subset
// when the epoch has at most limit writes, else every prefix, every
// suffix and every single write. what names the cut ("epoch 2, writes
// 5,7 of 4..8"). Images may repeat; fn must not keep img past the call
// unless it copies it.
func (r *Recorder) PowerCuts(before []byte, limit int, fn func(what string, img []byte)) {
	var epochs [][]Op
	cur := []Op{}
	for _, op := range r.Ops() {
		if op.Flush {
			if len(cur) > 0 {
				epochs = append(epochs, cur)
				cur = []Op{}
			}
			continue
		}
		cur = append(cur, op)
	}
	if len(cur) > 0 {
		epochs = append(epochs, cur)
	}
	durable := append([]byte(nil), before...)
	first := 1 // number of the epoch's first write, counted from 1
	for e, ops := range epochs {
		for _, subset := range subsets(len(ops), limit) {
			img := append([]byte(nil), durable...)
			var names []int
			for _, i := range subset {
				copy(img[ops[i].Off:], ops[i].Data)
				names = append(names, first+i)
			}
			fn(fmt.Sprintf("epoch %d, writes %v of %d..%d", e+1, names, first, first+len(ops)-1), img)
		}
		for _, op := range ops {
			copy(durable[op.Off:], op.Data)
		}
		first += len(ops)
	}
	fn("after the last write", durable)
}

// subsets lists index sets of n writes: all of them when n <= limit, else
// the prefixes, suffixes and singles.
func subsets(n, limit int) [][]int {
	var out [][]int
	if n <= limit {
		for mask := 0; mask < 1<<n; mask++ {
			var s []int
			for i := 0; i < n; i++ {
				if mask&(1<<i) != 0 {
					s = append(s, i)
				}
			}
			out = append(out, s)
		}
		return out
	}
	for k := 0; k <= n; k++ {
		out = append(out, span(0, k), span(k, n))
	}
	for i := 0; i < n; i++ {
		out = append(out, []int{i})
	}
	return out
}

func span(lo, hi int) []int {
	s := []int{}
	for i := lo; i < hi; i++ {
		s = append(s, i)
	}
	return s
}
