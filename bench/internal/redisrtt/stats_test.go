package redisrtt

import (
	"errors"
	"math"
	"strings"
	"testing"
)

const commandstats = "# Commandstats\r\n" +
	"cmdstat_evalsha:calls=200,usec=900,usec_per_call=4.50,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_client|setname:calls=2,usec=3,usec_per_call=1.50,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_info:calls=7,usec=70,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n"

func TestParseCommandStats(t *testing.T) {
	c, err := ParseCommandStats(commandstats)
	if err != nil {
		t.Fatal(err)
	}
	if c["evalsha"] != 200 || c["client|setname"] != 2 || c["info"] != 7 || len(c) != 3 {
		t.Errorf("parsed %v", c)
	}
	for _, bad := range []string{"cmdstat_get:usec=3\r\n", "cmdstat_get:calls=x,usec=1\r\n"} {
		t.Run(bad, func(t *testing.T) {
			if _, err := ParseCommandStats(bad); !errors.Is(err, ErrStats) {
				t.Errorf("err = %v, want ErrStats", err)
			}
		})
	}
}

func TestSubPerUnit(t *testing.T) {
	before := Counts{"evalsha": 10, "info": 3, "ping": 5}
	after := Counts{"evalsha": 410, "info": 5, "ping": 7, "publish": 1}
	d := Sub(after, before)
	if len(d) != 3 || d["evalsha"] != 400 || d["ping"] != 2 || d["publish"] != 1 || d.Total() != 403 {
		t.Errorf("Sub = %v", d)
	}
	// 2 s of background at 1 ping/s is taken away; 200 statements.
	per := PerUnit(d, map[string]float64{"ping": 1}, 2, 200)
	if per["evalsha"] != 2 || per["publish"] != 0.005 || len(per) != 2 {
		t.Errorf("PerUnit = %v", per)
	}
	if math.Abs(Sum(per)-2.005) > 1e-9 {
		t.Errorf("Sum = %v", Sum(per))
	}
	if len(PerUnit(d, nil, 1, 0)) != 0 || len(Rate(d, 0)) != 0 {
		t.Error("zero units or seconds gave figures")
	}
	if r := Rate(Counts{"ping": 10}, 5); r["ping"] != 2 {
		t.Errorf("Rate = %v", r)
	}
	if got := Format(map[string]float64{"a": 1, "b": 2}); got != "b 2.00, a 1.00" {
		t.Errorf("Format = %q", got)
	}
	if Format(nil) != "none" {
		t.Error("Format(nil)")
	}
}

func TestParseMonitorLine(t *testing.T) {
	tests := []struct {
		in   string
		want Line
		ok   bool
	}{
		{`+1700000000.123456 [0 127.0.0.1:5000] "EVALSHA" "abc" "1" "k"`, Line{Source: "127.0.0.1:5000", Command: "evalsha", Args: ` "abc" "1" "k"`, At: 1700000000.123456}, true},
		{`+1700000000.123456 [0 lua] "zrem" "q" "m"`, Line{Source: "lua", Command: "zrem", Args: ` "q" "m"`, At: 1700000000.123456}, true},
		{`+1700000000.1 [0 unix:/tmp/r.sock] "ping"`, Line{Source: "unix:/tmp/r.sock", Command: "ping", At: 1700000000.1}, true},
		{"+OK", Line{}, false},
		{`+1.0 [0 x] nope`, Line{}, false},
		{`+1.0 [broken "get"`, Line{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := ParseMonitorLine(tt.in)
			if ok != tt.ok || got != tt.want {
				t.Errorf("got %+v %v, want %+v %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestCountSent(t *testing.T) {
	lines := []Line{
		{Source: "1.1.1.1:1", Command: "evalsha"}, {Source: "lua", Command: "set"},
		{Source: "1.1.1.1:1", Command: "evalsha"}, {Source: "me:2", Command: "info"},
	}
	c := CountSent(lines, "me:2")
	if len(c) != 1 || c["evalsha"] != 2 {
		t.Errorf("CountSent = %v", c)
	}
}

// TestCountOnPath: only what clients sent inside a statement's span
// counts, at either end of it too.
func TestCountOnPath(t *testing.T) {
	lines := []Line{
		{Source: "1.1.1.1:1", Command: "evalsha", At: 10.0},  // before the first span
		{Source: "1.1.1.1:1", Command: "evalsha", At: 10.5},  // in it
		{Source: "lua", Command: "set", At: 10.5},            // a script's own
		{Source: "1.1.1.1:1", Command: "evalsha", At: 11.5},  // in the pause
		{Source: "1.1.1.1:1", Command: "evalsha", At: 12.0},  // at the second span's start
		{Source: "me:2", Command: "info", At: 12.2},          // bench's own
		{Source: "1.1.1.1:1", Command: "evalsha", At: 13.01}, // after the last
	}
	c := CountOnPath(lines, "me:2", []Span{{From: 10.1, To: 11}, {From: 12, To: 13}})
	if len(c) != 1 || c["evalsha"] != 2 {
		t.Errorf("CountOnPath = %v, want evalsha 2", c)
	}
}

func TestReportAndTargets(t *testing.T) {
	d := Data{N: 100, Rounds: 2, Background: map[string]float64{"ping": 0.5}, SentIdle: map[string]float64{"ping": 0.5},
		Update: []Window{{Round: 1, RoundTrips: 2, Calls: 18, LatencyUs: 600, SentPerUnit: map[string]float64{"evalsha": 2}},
			{Round: 2, RoundTrips: 3, Calls: 18, LatencyUs: 800}},
		DirectUpdate: []Window{{Round: 1, LatencyUs: 200}, {Round: 2, LatencyUs: 200}},
	}
	tg := targets(d)
	if len(tg) != 2 || tg[0].Met || tg[0].Got != "2.50" || tg[1].Met || tg[1].Got != "18.00" {
		t.Errorf("targets = %+v (median of 2 and 3 round trips is 2.5, above 2)", tg)
	}
	if got := latencyRatio(d.Update, d.DirectUpdate); got != 3.5 {
		t.Errorf("latencyRatio = %v, want median of 3 and 4", got)
	}
	d.Update[1].RoundTrips = 2
	if tg := targets(d); !tg[0].Met {
		t.Errorf("2 round trips not met: %+v", tg)
	}
	d.Paced = []Window{{Round: 1, PathTrips: 1}, {Round: 2, PathTrips: 2}}
	if tg := targets(d); len(tg) != 3 || tg[1].Met || tg[1].Got != "1.50" {
		t.Errorf("round trips on the path, median of 1 and 2: %+v", tg)
	}
	d.Paced[1].PathTrips = 1
	if tg := targets(d); !tg[1].Met {
		t.Errorf("1 round trip on the path not met: %+v", tg)
	}
	if !strings.Contains(Format(d.Update[0].SentPerUnit), "evalsha 2.00") {
		t.Error("Format of sent per unit")
	}
}
