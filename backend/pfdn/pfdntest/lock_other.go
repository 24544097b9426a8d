// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package pfdntest

import "errors"

func lockFile(path string) (unlock func(), err error) {
	return nil, errors.New("the emulator binaries need flock (a Unix system)")
}
