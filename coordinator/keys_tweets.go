package coordinator

// Keys of the tweeter (SPEC §5.5) that are ours, not upstream's.

// KeyTweetsFailed (sorted set, ours): member = tweet text the tweeter gave
// up on, score = UNIX time it gave up. Pruned with tweets:done.
const KeyTweetsFailed = "archivebot:tweets:failed"
