package tweeter

// Linked exposes linked to the tests: whether X (and Mastodon) certainly
// link a word as a whole URL.
var Linked = linked
