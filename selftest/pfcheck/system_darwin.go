// SPDX-License-Identifier: Apache-2.0

package pfcheck

import (
	"context"
	"fmt"
	"strings"

	"github.com/macake/macake/selftest/check"
	"github.com/macake/macake/sense/ifstat"
	"github.com/macake/macake/sense/linkfacts"
)

func probeRoutes(context.Context) check.Result {
	c, err := linkfacts.CompareWithXNetRoute()
	if err != nil {
		return check.Result{Status: check.Error, Detail: err.Error()}
	}
	r := problemsResult(c.Disagreements, fmt.Sprintf("%d messages parsed", c.Messages), "the same read by x/net/route")
	if len(c.Uncompared) > 0 && r.Status == check.OK {
		r.Detail = fmt.Sprint("not compared: ", c.Uncompared)
	}
	return r
}

func probeCounters(context.Context) check.Result {
	exact, rounded, problems, err := ifstat.CompareSources("lo0")
	if err != nil {
		return check.Result{Status: check.Error, Detail: err.Error()}
	}
	return problemsResult(problems,
		fmt.Sprintf("lo0 %d B in, %d B out (exact)", exact.RxBytes, exact.TxBytes),
		fmt.Sprintf("%d B in, %d B out (NET_RT_IFLIST2, 1 KiB steps, 32 bits)", rounded.RxBytes, rounded.TxBytes))
}

// problemsResult is a probe's result from its disagreements.
func problemsResult(problems []string, real, expected string) check.Result {
	r := check.Result{Status: check.OK, Real: real, Expected: expected}
	if len(problems) > 0 {
		r.Status = check.Differs
		r.Detail = strings.Join(problems, "; ")
	}
	return r
}
