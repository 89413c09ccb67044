//go:build !race

package tweeter_test

const raceDetector = false
