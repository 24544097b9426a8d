// SPDX-License-Identifier: Apache-2.0

package linkmodel

import (
	"fmt"
	"strings"
	"time"

	"github.com/macake/macake/shape"
	"github.com/macake/macake/sim"
	"github.com/macake/macake/sim/trace"
)

// ClassRTT is the base RTT the simulator gives a trace's path by class
// (benchmark.md §6.1: LTE 40–60 ms, Starlink 30–45 ms minimum; 3G HSDPA
// and fixed broadband are not in §6.1: a 3G path's idle RTT is longer than
// LTE's, a fixed line's shorter; the traces carry no delay series).
var ClassRTT = map[string]time.Duration{
	"starlink":  40 * time.Millisecond,
	"cellular":  50 * time.Millisecond,
	"lte-tcp":   50 * time.Millisecond,
	"5g":        30 * time.Millisecond,
	"3g":        60 * time.Millisecond,
	"broadband": 20 * time.Millisecond,
}

// FromTrace builds a link from a capacity trace. The trace's own direction
// uses it; the other direction uses reverse when given (the paired .up/.down
// file or column), else a constant link at the trace's mean. Starlink traces
// get the 15-s reconfiguration of the base delay, like the built-in model.
func FromTrace(tr, reverse *trace.Trace, seed uint64) *sim.Link {
	class := tr.Class
	if class == "" {
		class = "trace"
	}
	l := &sim.Link{Name: tr.Name, Class: class, BaseRTT: 50 * time.Millisecond}
	if rtt, ok := ClassRTT[class]; ok {
		l.BaseRTT = rtt
	}
	d := tr.Direction
	other := shape.Upload
	if d == shape.Upload {
		other = shape.Download
	}
	l.Capacity[d] = tr
	if reverse != nil {
		l.Capacity[other] = reverse
	} else {
		mean := int64(tr.Mean())
		l.Capacity[other] = &trace.Trace{Name: tr.Name + " (reverse: constant at its mean)", Direction: other, Class: class, Rates: []int64{max(mean, 1_000_000)}, Step: time.Second}
	}
	if class == "starlink" {
		m := models["starlink"]
		l.RTTSteps, l.RTTPeriod = StarlinkDelay(m.baseRTT, m.rttSpread, seed, length)
	}
	return l
}

// LoadTraceLink builds a link from a command-line trace spec ("FILE" or
// "FILE:COLUMN"). A file with one trace per direction (Starlink's iperf.csv)
// gives both; a mahimahi .down/.up file is paired with its sibling when that
// exists; a file with several traces of one direction needs a column.
// measured reports which directions come from real traces.
func LoadTraceLink(spec string, seed uint64) (l *sim.Link, measured [2]bool, err error) {
	traces, err := trace.LoadSpec(spec)
	if err != nil {
		return nil, measured, err
	}
	var byDir [2][]*trace.Trace
	for _, t := range traces {
		byDir[t.Direction] = append(byDir[t.Direction], t)
	}
	if len(byDir[0]) > 1 || len(byDir[1]) > 1 {
		var cols []string
		for _, t := range traces {
			cols = append(cols, t.Name[strings.LastIndexByte(t.Name, ':')+1:])
		}
		return nil, measured, fmt.Errorf("%s holds %d traces; pick one with %s:COLUMN, COLUMN one of %s", spec, len(traces), spec, strings.Join(cols, ", "))
	}
	primary := traces[0]
	var reverse *trace.Trace
	if len(traces) == 2 {
		reverse = traces[1]
	} else if sib := trace.Sibling(spec); sib != "" {
		if st, err := trace.LoadSpec(sib); err == nil && len(st) == 1 {
			reverse = st[0]
		}
	}
	l = FromTrace(primary, reverse, seed)
	measured[primary.Direction] = true
	if reverse != nil {
		measured[reverse.Direction] = true
	}
	return l, measured, nil
}
