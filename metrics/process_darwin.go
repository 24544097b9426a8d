// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// processStats reads the open descriptors (/dev/fd) and the start time
// (sysctl kern.proc.pid). The resident and virtual sizes need
// task_info, a C call, and the release is built without cgo.
func processStats() procStats {
	p := procStats{openFDs: countFDs("/dev/fd")}
	if kp, err := unix.SysctlKinfoProc("kern.proc.pid", os.Getpid()); err == nil {
		p.start = time.Unix(0, kp.Proc.P_starttime.Nano())
	}
	return p
}
