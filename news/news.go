// Package news holds the words the services and the front ends share:
// what the services tell (a finish report, a job event, a job's progress)
// and the doors they tell it through (Announcer, FinishAnnouncer,
// StreamSink). It is a leaf: it imports nothing of the project but the
// job record (package record), so that a front end (bot, bot/irc, web,
// pipelineapi) can speak to the services without importing them.
//
// The name says what passes through it: news of jobs, going from the
// services that learn it to the front ends that report it.
package news
