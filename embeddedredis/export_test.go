package embeddedredis

import "testing"

// StartCPU starts a CPU-time measurement for the benchmarks of package
// embeddedredis_test, as startCPU does for the internal ones; the function
// it returns reports the CPU time per operation, "cpu-ns/op".
func StartCPU() func(*testing.B) { return startCPU().report }
