// SPDX-License-Identifier: Apache-2.0

package shape

// The bounds every part of macake keeps to, whatever the backend. A
// backend's own shaper may take less (its Limits); a policy is checked
// against those where the target backend is known.
const (
	// MaxRateBits is the highest rate macake handles anywhere: far above
	// any link (the fastest Ethernet is 800 Gbit/s), and low enough that
	// no rate arithmetic overflows an int64.
	MaxRateBits = 1_000_000_000_000
	// MaxQueueBytes is the largest queue any shaper macake drives takes:
	// a byte count of 32 bits (tc's bfifo).
	MaxQueueBytes = 1<<32 - 1
)

// Limits are the largest rate and queue one backend's shaper takes. The
// zero Limits are MaxRateBits and MaxQueueBytes.
type Limits struct {
	// Shaper names the shaper in messages, e.g. "dummynet".
	Shaper string
	// MaxRateBits is the highest rate it shapes, in bit/s.
	MaxRateBits int64
	// MaxQueueBytes is the largest queue it holds, in bytes.
	MaxQueueBytes int64
	// FitsQueue is true when the shaper's byte queue takes any packet
	// that still fits under its limit (Linux's bfifo), rather than
	// refusing every packet once its bytes are over the limit (dummynet):
	// an automatic queue then keeps a reserve for sparse packets
	// (autoqueue.SparseReserve).
	FitsQueue bool
}

// Rate returns the highest rate, MaxRateBits when l sets none.
func (l Limits) Rate() int64 {
	if l.MaxRateBits <= 0 {
		return MaxRateBits
	}
	return min(l.MaxRateBits, MaxRateBits)
}

// Queue returns the largest queue, MaxQueueBytes when l sets none.
func (l Limits) Queue() int64 {
	if l.MaxQueueBytes <= 0 {
		return MaxQueueBytes
	}
	return min(l.MaxQueueBytes, MaxQueueBytes)
}

// Name names the shaper, "macake" when l names none.
func (l Limits) Name() string {
	if l.Shaper == "" {
		return "macake"
	}
	return l.Shaper
}
