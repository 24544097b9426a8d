// SPDX-License-Identifier: Apache-2.0

package sim

// ring is a growable FIFO of values. The simulator moves millions of packets
// through a handful of queues, so the queues hold values, never pointers,
// and never allocate once they have grown to their working size.
type ring[T any] struct {
	buf  []T
	head int // index of the first element
	n    int // number of elements
}

func (r *ring[T]) len() int { return r.n }

func (r *ring[T]) push(v T) {
	if r.n == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = v
	r.n++
}

// front returns a pointer to the first element; the ring must not be empty.
func (r *ring[T]) front() *T { return &r.buf[r.head] }

// at returns a pointer to the i-th element from the front.
func (r *ring[T]) at(i int) *T { return &r.buf[(r.head+i)&(len(r.buf)-1)] }

func (r *ring[T]) pop() T {
	v := r.buf[r.head]
	var zero T
	r.buf[r.head] = zero
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	return v
}

func (r *ring[T]) grow() {
	size := 2 * len(r.buf)
	if size == 0 {
		size = 64
	}
	buf := make([]T, size)
	for i := 0; i < r.n; i++ {
		buf[i] = r.buf[(r.head+i)&(len(r.buf)-1)]
	}
	r.buf, r.head = buf, 0
}

// reset empties the ring, keeping its buffer.
func (r *ring[T]) reset() {
	clear(r.buf)
	r.head, r.n = 0, 0
}
