package main

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// progressAt drives a reencryptProgress with a clock the test sets: each
// report is (seconds since the first, bytes done) of total.
func progressAt(p *reencryptProgress, total int64, reports ...[2]float64) string {
	var b bytes.Buffer
	t0 := time.Unix(1000, 0)
	var now time.Time
	p.w, p.now = &b, func() time.Time { return now }
	for _, r := range reports {
		now = t0.Add(time.Duration(r[0] * float64(time.Second)))
		p.report(int64(r[1]), total)
	}
	return b.String()
}

// The progress line as cryptsetup 2.6.1's utils_progress.c prints it.
func TestReencryptProgressLikeCryptsetup(t *testing.T) {
	const MiB = 1 << 20
	cases := []struct {
		name    string
		p       reencryptProgress
		total   int64
		reports [][2]float64
		want    string
	}{
		{"first report only starts the clock", reencryptProgress{text: true}, 100 * MiB,
			[][2]float64{{0, 0}}, ""},
		{"half a second, rewritten in place", reencryptProgress{text: true}, 100 * MiB,
			[][2]float64{{0, 0}, {0.4, 10 * MiB}, {0.5, 20 * MiB}},
			"\033[2K\rProgress:  20.0%, ETA 00m02s,   20 MiB written, speed  40.0 MiB/s"},
		{"--progress-frequency: a line each", reencryptProgress{text: true, every: time.Second}, 100 * MiB,
			[][2]float64{{0, 0}, {0.5, 20 * MiB}, {1, 20 * MiB}, {2, 40 * MiB}, {2.5, 100 * MiB}},
			"Progress:  20.0%, ETA 00m04s,   20 MiB written, speed  20.0 MiB/s\n" +
				"Progress:  40.0%, ETA 00m03s,   40 MiB written, speed  20.0 MiB/s\n" +
				"Finished, time 00m02s,  100 MiB written, speed  40.0 MiB/s\n"},
		{"resumed at 70%: this run's rate", reencryptProgress{text: true, every: time.Second}, 100 * MiB,
			[][2]float64{{0, 70 * MiB}, {1, 80 * MiB}},
			"Progress:  80.0%, ETA 00m02s,   80 MiB written, speed  10.0 MiB/s\n"},
		{"JSON from the second report", reencryptProgress{json: true, dev: "img"}, 100 * MiB,
			[][2]float64{{0, 70 * MiB}, {1, 80 * MiB}, {1.5, 100 * MiB}},
			`{"device":"img","device_bytes":"83886080","device_size":"104857600","speed":"10485760","eta_ms":"2000","time_ms":"1000"}` + "\n" +
				`{"device":"img","device_bytes":"104857600","device_size":"104857600","speed":"20971520","eta_ms":"0","time_ms":"1500"}` + "\n"},
		{"batch mode prints nothing", reencryptProgress{}, 100 * MiB,
			[][2]float64{{0, 0}, {1, 50 * MiB}, {2, 100 * MiB}}, ""},
		{"GiB from 4 GiB, hours from 90 minutes", reencryptProgress{text: true}, 100 << 30,
			[][2]float64{{0, 0}, {3600, 5 << 30}},
			"\033[2K\rProgress:   5.0%, ETA 19h00m00s,    5 GiB written, speed   1.4 MiB/s"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := progressAt(&c.p, c.total, c.reports...); got != c.want {
				t.Errorf("got\n%q\nwant\n%q", got, c.want)
			}
		})
	}
}

func TestReencryptProgressUnits(t *testing.T) {
	for d, want := range map[time.Duration]string{
		89*time.Minute + 59*time.Second: "89m59s",
		90 * time.Minute:                "01h30m00s",
		36*time.Hour - time.Second:      "35h59m59s",
		36 * time.Hour:                  "01 days",
		100 * time.Hour:                 "04 days",
	} {
		if got := humanTime(d); got != want {
			t.Errorf("humanTime(%v) = %q, want %q", d, got, want)
		}
	}
	for n, want := range map[int64]string{
		4<<30 - 1: "4095 MiB",
		4 << 30:   "   4 GiB",
		4<<40 - 1: "4095 GiB",
		4 << 40:   "   4 TiB",
		4 << 50:   "   4 PiB",
		4 << 60:   "   4 EiB",
	} {
		if got := sizeUnits(n); got != want {
			t.Errorf("sizeUnits(%d) = %q, want %q", n, got, want)
		}
	}
	for b, want := range map[float64]string{1024: "1024.0 B", 1025: "1.0 KiB", 3 << 30: "3.0 GiB"} {
		if v, u := rateUnits(b); fmt.Sprintf("%.1f %s", v, u) != want {
			t.Errorf("rateUnits(%v) = %v %s, want %s", b, v, u, want)
		}
	}
}
