// SPDX-License-Identifier: Apache-2.0

package pfdntest

// enqueue is dummynet_io's queue check for a packet the pipe holds
// (Packet.Held), after it has been counted in Tot_pkt/bytes: a byte queue
// already holding more than its size, or a slot queue at its size, drops
// it (Drp); otherwise it waits in the queue (Pkt/Byte) until Drain.
// Packets that are not held pass straight through, as on an idle pipe.
func enqueue(fs *FlowSet, f *Flow, pkt Packet) {
	if !pkt.Held {
		return
	}
	full := int64(f.Len) >= int64(fs.QSize)
	if fs.Bytes {
		full = int64(f.LenBytes) > int64(fs.QSize)
	}
	if full {
		f.Drops++
		return
	}
	f.Len++
	f.LenBytes += uint32(pkt.Bytes)
}

// Drain sends everything queued in pipe n: its flows' queued packets and
// bytes go to zero, their totals and drops stay. It reports whether the
// pipe exists.
func (e *Emulator) Drain(n int) bool {
	found := false
	e.with(func(m *Machine) {
		if p := m.pipe(int32(n)); p != nil {
			found = true
			for i := range p.FS.Flows {
				p.FS.Flows[i].Len, p.FS.Flows[i].LenBytes = 0, 0
			}
		}
	})
	return found
}
