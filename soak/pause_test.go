package soak

// The schedule's own pause (pauseQueue): the users' pauses hold 2–5 s,
// mostly while every queue is empty (at ci scale a job is taken within
// milliseconds of its !a), so a pause that did not bind would rarely be
// seen. This one makes jobs wait in the queues before the pause and
// holds it while every pipeline asks for work.

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/archiveteam/archivebot-go/bot/irc/irctest"
)

const (
	// pauseFreeze is how long every pipeline is frozen before the
	// pause: longer than an API take's long-poll (the simulators'
	// -poll-interval, 3 s), so that no take waits at the node and the
	// jobs queued meanwhile stay in their queues.
	pauseFreeze = 4 * time.Second
	// pauseQueueHold is how long the pause holds once the pipelines
	// run again: several of their polls (3 s) and job ends.
	pauseQueueHold = 10 * time.Second
)

// pauseWithBacklog freezes every pipeline, queues a job in each of the
// users' queues (the users' own !a keep coming too), pauses every queue
// with u, lets the pipelines run and ask for jobs while the pause holds,
// then resumes. The jobs waiting aside at the pause are noted: jobs
// queued before the pause that no pipeline may get until the resume.
func (s *soak) pauseWithBacklog(u *irctest.User, st step) {
	procs := s.pipeProcs()
	for _, p := range procs {
		p.Signal(syscall.SIGSTOP)
	}
	frozen := true
	thaw := func() {
		if frozen {
			for _, p := range procs {
				p.Signal(syscall.SIGCONT)
			}
			frozen = false
		}
	}
	defer thaw()
	s.waitUntil(time.Now().Add(pauseFreeze))
	s.gate.RLock()
	for i, kind := range []string{"a", "ao"} {
		url := fmt.Sprintf("https://soak.example/%s/%d/backlog-%d-%d", u.Nick, s.seed, st.At/time.Second, i)
		id := s.jobs.sent(url)
		if r, ok := s.command(u, "!"+kind+" "+url); ok && strings.HasPrefix(r, "Queued ") && id != "" {
			s.jobs.ack(id)
		}
	}
	r, ok := s.command(u, "!pause all soak: jobs queued before it")
	s.gate.RUnlock()
	if !ok || !strings.HasPrefix(r, "Paused ") {
		// Another pause holds (a user's !pause all): that one is judged.
		s.note("pause-queue: !pause all not made (%q): no pause of the schedule's this time", r)
		if !ok {
			s.resume(u, "all") // it may have been made
		}
		return
	}
	aside := s.jobsAside()
	none := s.takesNone.Load()
	thaw()
	s.waitUntil(time.Now().Add(pauseQueueHold))
	// The API takes answered with no job while the pause held (the
	// direct and bridged pipelines' polls of Redis are not seen here).
	none = s.takesNone.Load() - none
	s.resume(u, "all")
	s.note("pause-queue: every queue paused with %d jobs waiting aside, queued before the pause; for %v the pipelines asked for jobs: %d API takes answered with none", aside, pauseQueueHold, none)
}

// jobsAside counts the jobs in the queues' lists aside
// (archivebot:paused:QUEUE, doc/protocol.md, Paused queues).
func (s *soak) jobsAside() int64 {
	rdb := s.redis.failoverClient()
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	keys, err := rdb.Keys(ctx, "archivebot:paused:*").Result()
	if err != nil {
		return -1
	}
	var n int64
	for _, k := range keys {
		if l, err := rdb.LLen(ctx, k).Result(); err == nil {
			n += l
		}
	}
	return n
}
