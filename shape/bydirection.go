// SPDX-License-Identifier: Apache-2.0

package shape

// ByDirection holds one value per direction, so that code picks a
// direction with Of and At instead of branching on it by hand.
type ByDirection[T any] struct {
	Upload   T
	Download T
}

// Of returns d's value.
func (b ByDirection[T]) Of(d Direction) T { return *b.At(d) }

// At returns where d's value is kept, to change it.
func (b *ByDirection[T]) At(d Direction) *T {
	if d == Upload {
		return &b.Upload
	}
	return &b.Download
}

// With returns b with d's value replaced by v.
func (b ByDirection[T]) With(d Direction, v T) ByDirection[T] {
	*b.At(d) = v
	return b
}
