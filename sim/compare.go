// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
)

// Arm is one controller of a comparison, by name.
type Arm struct {
	Name    string
	Factory Factory
	// Queue, when set, replaces the run's queue rule for this arm (an
	// arm named CONTROLLER#QUEUE, see SplitArm).
	Queue *QueueRule
}

// SplitArm takes an arm's name apart: "ours#auto:perflow=3" is the
// controller "ours" with the queue rule "auto:perflow=3" (ParseQueueRule);
// a name without "#" has no queue rule of its own.
func SplitArm(name string) (controller string, q *QueueRule, err error) {
	controller, rule, ok := strings.Cut(name, "#")
	if !ok {
		return name, nil, nil
	}
	r, err := ParseQueueRule(rule)
	if err != nil {
		return "", nil, fmt.Errorf("arm %q: %w", name, err)
	}
	return controller, &r, nil
}

// Options returns opt with the arm's queue rule, if it has one.
func (a Arm) Options(opt Options) Options {
	if a.Queue != nil {
		opt.Queue = *a.Queue
	}
	return opt
}

// BaselineArms returns the arms of the named built-in baselines.
func BaselineArms(names ...string) ([]Arm, error) {
	var arms []Arm
	for _, n := range names {
		f, err := Baseline(n)
		if err != nil {
			return nil, err
		}
		arms = append(arms, Arm{Name: n, Factory: f})
	}
	return arms, nil
}

// Job is one run of a batch.
type Job struct {
	Link    *Link
	Options Options
	Arm     Arm
}

// RunAll runs the jobs on up to workers goroutines (0 = one per CPU) and
// returns their results in job order. Every run is independent and
// deterministic, so the order of execution does not change any number.
func RunAll(jobs []Job, workers int) ([]*Result, error) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	results := make([]*Result, len(jobs))
	errs := make([]error, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				j := jobs[i]
				r, err := Run(j.Link, j.Options, j.Arm.Factory)
				if err != nil {
					errs[i] = fmt.Errorf("%s on %s: %w", j.Arm.Name, j.Link.Name, err)
					continue
				}
				r.Controller = j.Arm.Name
				results[i] = r
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return results, nil
}
