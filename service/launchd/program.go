// SPDX-License-Identifier: Apache-2.0

package launchd

import (
	"errors"
	"fmt"

	"github.com/macake/macake/service"
)

// ProgramOfPlist reads what an installed LaunchDaemon plist runs: the
// Program DaemonJob wrote into it, for a doctor that checks it.
func ProgramOfPlist(data []byte) (service.Program, error) {
	v, err := Decode(data)
	if err != nil {
		return service.Program{}, err
	}
	d, isDict := v.(Dict)
	if !isDict {
		return service.Program{}, errors.New("the plist's root is not a dictionary")
	}
	arr, isArr := d.Get("ProgramArguments").(Array)
	if !isArr {
		return service.Program{}, errors.New("no ProgramArguments array")
	}
	args := make([]string, len(arr))
	for i, a := range arr {
		s, isStr := a.(String)
		if !isStr {
			return service.Program{}, fmt.Errorf("ProgramArguments[%d] is not a string", i)
		}
		args[i] = string(s)
	}
	return service.ParseArgs(args)
}
