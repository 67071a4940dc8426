package redisring

import "sync"

// workers are long-lived goroutines that run the per-shard calls of a
// batch other than the one the caller runs itself (parallel). A goroutine
// started for each call begins with a small stack, which a call into
// rueidis grows, copying it, every time; a worker keeps its stack, and
// costs nothing while it waits. A call that finds every worker busy
// (concurrent batches) runs on a goroutine of its own.
type workers struct {
	jobs chan func()
	done chan struct{}
	once sync.Once
}

// startWorkers starts n workers; nil when n is 0.
func startWorkers(n int) *workers {
	if n <= 0 {
		return nil
	}
	w := &workers{jobs: make(chan func()), done: make(chan struct{})}
	for range n {
		go w.loop()
	}
	return w
}

func (w *workers) loop() {
	for {
		select {
		case job := <-w.jobs:
			job()
		case <-w.done:
			return
		}
	}
}

// run runs job on an idle worker, or on a new goroutine.
func (w *workers) run(job func()) {
	if w != nil {
		select {
		case w.jobs <- job:
			return
		default:
		}
	}
	go job()
}

// stop ends the workers (they finish the job they run); run goes on
// working after it, with a goroutine per job.
func (w *workers) stop() {
	if w != nil {
		w.once.Do(func() { close(w.done) })
	}
}
