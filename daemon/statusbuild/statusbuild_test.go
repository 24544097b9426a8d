// SPDX-License-Identifier: Apache-2.0

package statusbuild

import (
	"reflect"
	"testing"
	"time"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/daemon/statusapi"
)

// TestShaperStatsCarriesTins: CAKE's tins reach the status document
// field by field, delays in seconds to the microsecond.
func TestShaperStatsCarriesTins(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	got := ShaperStats(backend.ShaperStats{Name: "qdisc 4d4b: on eth0", Bytes: 10, Tins: []backend.TinStats{{
		Name: "best_effort", ThresholdBits: 20e6, Bytes: 9, Packets: 2, Drops: 3, ECNMarks: 4, ACKDrops: 5, BacklogBytes: 6,
		PeakDelay: 8810 * time.Microsecond, AvgDelay: 398 * time.Microsecond, BaseDelay: 15 * time.Microsecond,
		SparseFlows: 7, BulkFlows: 8, UnresponsiveFlows: 9,
	}}}, at)
	want := []statusapi.TinStats{{Name: "best_effort", ThresholdBits: 20e6, Bytes: 9, Packets: 2, Drops: 3, ECNMarks: 4, ACKDrops: 5,
		BacklogBytes: 6, AverageDelaySeconds: 0.000398, PeakDelaySeconds: 0.00881, BaseDelaySeconds: 0.000015,
		SparseFlows: 7, BulkFlows: 8, UnresponsiveFlows: 9}}
	if !reflect.DeepEqual(got.Tins, want) || got.Bytes != 10 || !got.ReadAt.Equal(at) {
		t.Errorf("status stats %+v\nwant tins %+v", got, want)
	}
	if ShaperStats(backend.ShaperStats{}, at).Tins != nil {
		t.Error("a shaper without tins got some")
	}
}
