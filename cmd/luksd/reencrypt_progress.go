package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/urfave/cli/v2"
)

// reencryptProgress prints a reencryption's progress as cryptsetup
// 2.6.1's tools_progress (src/utils_progress.c) does: the first report
// only starts the clock; then a report every --progress-frequency
// seconds (a line each) or every half second (one line rewritten in
// place), and always the last one ("Finished"). The rate counts only the
// bytes done in this run, so a resumed run does not claim the earlier
// runs' bytes as its own. --progress-json prints cryptsetup's JSON lines
// instead, even with --batch-mode, which otherwise prints nothing.
type reencryptProgress struct {
	w     io.Writer
	dev   string
	json  bool
	text  bool
	every time.Duration // --progress-frequency; 0: half a second, in place
	now   func() time.Time

	start, last time.Time
	from        int64 // bytes done at the first report
	done, total int64 // the last report's
	started     bool
	// onStart, when set, runs at the first report: the run has opened the
	// volume keys by then.
	onStart func()
}

// newReencryptProgress is the progress report c's options ask for, on
// standard output.
func newReencryptProgress(c *cli.Context) *reencryptProgress {
	return &reencryptProgress{
		w:     os.Stdout,
		dev:   c.Args().First(),
		json:  c.Bool("progress-json"),
		text:  !c.Bool("batch-mode"),
		every: time.Duration(max(c.Int("progress-frequency"), 0)) * time.Second,
		now:   time.Now,
	}
}

// report is the reencryption's progress callback.
func (p *reencryptProgress) report(done, total int64) {
	now := p.now()
	p.done, p.total = done, total
	if !p.started {
		p.started, p.start, p.last, p.from = true, now, now, done
		if p.onStart != nil {
			p.onStart()
		}
		return
	}
	every := p.every
	if every == 0 {
		every = 500 * time.Millisecond
	}
	final := done == total
	if !final && now.Sub(p.last) < every {
		return
	}
	p.last = now
	elapsed := now.Sub(p.start)
	if elapsed <= 0 {
		return
	}
	speed := float64(done-p.from) / elapsed.Seconds() // bytes/s in this run
	// The time left at this run's rate (cryptsetup's formula, size/speed
	// minus the time spent, overstates it on a resumed run).
	var eta time.Duration
	if speed > 0 && !final {
		eta = time.Duration(float64(total-done) / speed * float64(time.Second))
	}
	switch {
	case p.json:
		fmt.Fprintf(p.w, "{\"device\":\"%s\",\"device_bytes\":\"%d\",\"device_size\":\"%d\",\"speed\":\"%d\",\"eta_ms\":\"%d\",\"time_ms\":\"%d\"}\n",
			p.dev, done, total, uint64(speed), eta.Milliseconds(), elapsed.Milliseconds())
	case p.text:
		p.printLine(done, total, speed, eta, elapsed, final)
	}
}

// printLine prints the progress line, or the final one.
func (p *reencryptProgress) printLine(done, total int64, speed float64, eta, elapsed time.Duration, final bool) {
	eol := ""
	if p.every > 0 {
		eol = "\n"
	} else {
		fmt.Fprint(p.w, "\033[2K\r")
	}
	rate, unit := rateUnits(speed)
	written := sizeUnits(done)
	if final {
		fmt.Fprintf(p.w, "Finished, time %s, %s written, speed %5.1f %s/s\n", humanTime(elapsed), written, rate, unit)
		return
	}
	fmt.Fprintf(p.w, "Progress: %5.1f%%, ETA %s, %s written, speed %5.1f %s/s%s",
		float64(done)*100/float64(total), humanTime(eta), written, rate, unit, eol)
}

// interrupted ends a run a signal stopped as cryptsetup does: the line
// rewritten in place is cleared, and the error says so (exit 1).
func (p *reencryptProgress) interrupted() error {
	if p.every == 0 && !p.json {
		fmt.Fprint(p.w, "\033[2K\r")
	}
	// report would trim the leading newline cryptsetup prints.
	fmt.Fprintln(os.Stderr, "\nReencryption interrupted.")
	return exitf(exitParams, "")
}

// humanTime is cryptsetup's time: minutes and seconds below 90 minutes,
// hours, minutes and seconds below 36 hours, else whole days.
func humanTime(d time.Duration) string {
	s := int64(d / time.Second)
	switch {
	case d < 90*time.Minute:
		return fmt.Sprintf("%02dm%02ds", s/60, s%60)
	case d < 36*time.Hour:
		return fmt.Sprintf("%02dh%02dm%02ds", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%02d days", s/86400)
}

// sizeUnits is cryptsetup's "N UNIT" for n bytes: MiB below 4 GiB, GiB
// below 4 TiB, and so on, rounded down.
func sizeUnits(n int64) string {
	u := uint64(n)
	for _, unit := range []struct {
		name  string
		shift uint
	}{{"MiB", 20}, {"GiB", 30}, {"TiB", 40}, {"PiB", 50}} {
		if u < 1<<(unit.shift+12) {
			return fmt.Sprintf("%4d %s", u>>unit.shift, unit.name)
		}
	}
	return fmt.Sprintf("%4d EiB", u>>60)
}

// rateUnits is a rate of b bytes/s in cryptsetup's unit: the largest of
// KiB, MiB and GiB it exceeds, else B.
func rateUnits(b float64) (float64, string) {
	switch {
	case b > 1<<30:
		return b / (1 << 30), "GiB"
	case b > 1<<20:
		return b / (1 << 20), "MiB"
	case b > 1<<10:
		return b / (1 << 10), "KiB"
	}
	return b, "B"
}
