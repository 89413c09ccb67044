//go:build race

package tweeter_test

// raceDetector: the tests run under -race, where miniredis's Lua, which
// the flood spends its time in, runs about five times slower.
const raceDetector = true
