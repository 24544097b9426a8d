// SPDX-License-Identifier: Apache-2.0

package shape

import "testing"

func TestByDirectionPicksEachDirection(t *testing.T) {
	var b ByDirection[int]
	*b.At(Upload) = 1
	b = b.With(Download, 2)
	if b.Upload != 1 || b.Download != 2 || b.Of(Upload) != 1 || b.Of(Download) != 2 {
		t.Errorf("ByDirection mixed the directions up: %+v", b)
	}
	c := b.With(Upload, 3)
	if b.Upload != 1 || c.Upload != 3 {
		t.Errorf("With changed its receiver: %+v, %+v", b, c)
	}
}
