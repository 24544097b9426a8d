// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"os"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"
)

// memStats are the go_memstats_* gauges and counters, under the names and
// meanings of the Prometheus client's Go collector, so that dashboards
// written for it work.
var memStats = []struct {
	name, help, typ string
	eval            func(*runtime.MemStats) uint64
}{
	{"alloc_bytes", "Number of bytes allocated in heap and currently in use.", typeGauge, func(m *runtime.MemStats) uint64 { return m.Alloc }},
	{"alloc_bytes_total", "Total number of bytes allocated in heap until now, even if released already.", typeCounter, func(m *runtime.MemStats) uint64 { return m.TotalAlloc }},
	{"sys_bytes", "Number of bytes obtained from system.", typeGauge, func(m *runtime.MemStats) uint64 { return m.Sys }},
	{"mallocs_total", "Total number of heap objects allocated, both live and gc-ed.", typeCounter, func(m *runtime.MemStats) uint64 { return m.Mallocs }},
	{"frees_total", "Total number of heap objects frees.", typeCounter, func(m *runtime.MemStats) uint64 { return m.Frees }},
	{"heap_alloc_bytes", "Number of heap bytes allocated and currently in use, same as go_memstats_alloc_bytes.", typeGauge, func(m *runtime.MemStats) uint64 { return m.HeapAlloc }},
	{"heap_sys_bytes", "Number of heap bytes obtained from system.", typeGauge, func(m *runtime.MemStats) uint64 { return m.HeapSys }},
	{"heap_idle_bytes", "Number of heap bytes waiting to be used.", typeGauge, func(m *runtime.MemStats) uint64 { return m.HeapIdle }},
	{"heap_inuse_bytes", "Number of heap bytes that are in use.", typeGauge, func(m *runtime.MemStats) uint64 { return m.HeapInuse }},
	{"heap_released_bytes", "Number of heap bytes released to OS.", typeGauge, func(m *runtime.MemStats) uint64 { return m.HeapReleased }},
	{"heap_objects", "Number of currently allocated objects.", typeGauge, func(m *runtime.MemStats) uint64 { return m.HeapObjects }},
	{"stack_inuse_bytes", "Number of bytes obtained from system for stack allocator in non-CGO environments.", typeGauge, func(m *runtime.MemStats) uint64 { return m.StackInuse }},
	{"stack_sys_bytes", "Number of bytes obtained from system for stack allocator.", typeGauge, func(m *runtime.MemStats) uint64 { return m.StackSys }},
	{"mspan_inuse_bytes", "Number of bytes in use by mspan structures.", typeGauge, func(m *runtime.MemStats) uint64 { return m.MSpanInuse }},
	{"mspan_sys_bytes", "Number of bytes used for mspan structures obtained from system.", typeGauge, func(m *runtime.MemStats) uint64 { return m.MSpanSys }},
	{"mcache_inuse_bytes", "Number of bytes in use by mcache structures.", typeGauge, func(m *runtime.MemStats) uint64 { return m.MCacheInuse }},
	{"mcache_sys_bytes", "Number of bytes used for mcache structures obtained from system.", typeGauge, func(m *runtime.MemStats) uint64 { return m.MCacheSys }},
	{"buck_hash_sys_bytes", "Number of bytes used by the profiling bucket hash table.", typeGauge, func(m *runtime.MemStats) uint64 { return m.BuckHashSys }},
	{"gc_sys_bytes", "Number of bytes used for garbage collection system metadata.", typeGauge, func(m *runtime.MemStats) uint64 { return m.GCSys }},
	{"other_sys_bytes", "Number of bytes used for other system allocations.", typeGauge, func(m *runtime.MemStats) uint64 { return m.OtherSys }},
	{"next_gc_bytes", "Number of heap bytes when next garbage collection will take place.", typeGauge, func(m *runtime.MemStats) uint64 { return m.NextGC }},
}

// writeGo writes the Go runtime's metrics (go_*), read at the scrape.
func writeGo(e *expo) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	var gc debug.GCStats
	gc.PauseQuantiles = make([]time.Duration, 5) // minimum, quartiles, maximum
	debug.ReadGCStats(&gc)
	threads, _ := runtime.ThreadCreateProfile(nil)

	e.header("go_gc_duration_seconds", "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.", typeSummary)
	for i, q := range gc.PauseQuantiles {
		e.sample("go_gc_duration_seconds", `{quantile="`+formatFloat(float64(i)/4)+`"}`, q.Seconds())
	}
	e.sample("go_gc_duration_seconds_sum", "", gc.PauseTotal.Seconds())
	e.sampleUint("go_gc_duration_seconds_count", "", uint64(gc.NumGC))
	e.single("go_goroutines", "Number of goroutines that currently exist.", typeGauge, float64(runtime.NumGoroutine()))
	e.header("go_info", "Information about the Go environment.", typeGauge)
	e.sample("go_info", renderLabels([]string{"version"}, []string{runtime.Version()}, "", ""), 1)
	for _, m := range memStats {
		e.single("go_memstats_"+m.name, m.help, m.typ, float64(m.eval(&ms)))
	}
	e.single("go_memstats_last_gc_time_seconds", "Number of seconds since 1970 of last garbage collection.", typeGauge, float64(gc.LastGC.UnixNano())/1e9)
	e.single("go_threads", "Number of OS threads created.", typeGauge, float64(threads))
}

// writeProcess writes the process's metrics (process_*) that this system
// can give: CPU time and the file descriptor limit everywhere, the rest
// where processStats reads them (Linux: all; macOS without cgo: the
// start time and the open descriptors).
func writeProcess(e *expo) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		e.single("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", typeCounter, cpu.Seconds())
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		e.single("process_max_fds", "Maximum number of open file descriptors.", typeGauge, float64(lim.Cur))
	}
	p := processStats()
	if p.openFDs >= 0 {
		e.single("process_open_fds", "Number of open file descriptors.", typeGauge, float64(p.openFDs))
	}
	if p.rss > 0 {
		e.single("process_resident_memory_bytes", "Resident memory size in bytes.", typeGauge, float64(p.rss))
	}
	if !p.start.IsZero() {
		e.single("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", typeGauge, float64(p.start.UnixMilli())/1e3)
	}
	if p.vsize > 0 {
		e.single("process_virtual_memory_bytes", "Virtual memory size in bytes.", typeGauge, float64(p.vsize))
	}
}

// procStats is what processStats could read; a field it could not is
// zero (openFDs: -1).
type procStats struct {
	openFDs    int
	rss, vsize uint64
	start      time.Time
}

// countFDs counts the open file descriptors listed in dir (/proc/self/fd,
// /dev/fd), less the one reading it; -1 when it cannot be read. Names
// only: a stat of each would fail on kqueue descriptors.
func countFDs(dir string) int {
	f, err := os.Open(dir)
	if err != nil {
		return -1
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return -1
	}
	return len(names) - 1
}
