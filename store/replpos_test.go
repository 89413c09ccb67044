package store

import "testing"

// TestPositionsHoldsAcrossReplicationIDs: offsets of different masters
// compare only through the replication ID history. A is the first
// master; B, promoted when it held A's stream up to offset 100, reports
// second_repl_offset 101 (the first offset of A's stream it does not
// hold); C, promoted from B later, names only B.
func TestPositionsHoldsAcrossReplicationIDs(t *testing.T) {
	a := ParseReplInfo("# Replication\r\nrole:master\r\nmaster_replid:aaaa\r\nmaster_replid2:0000000000000000000000000000000000000000\r\nmaster_repl_offset:150\r\nsecond_repl_offset:-1\r\n")
	if a.Role != "master" || a.ID != "aaaa" || a.ID2 != "" || a.Offset != 150 || a.SecondOffset != -1 {
		t.Fatalf("parsed %+v", a)
	}
	// B was promoted when it held A's stream up to offset 100: Redis
	// sets second_repl_offset to 101.
	b := ReplInfo{Role: "master", ID: "bbbb", ID2: "aaaa", Offset: 300, SecondOffset: 101}
	c := ReplInfo{Role: "master", ID: "cccc", ID2: "bbbb", Offset: 400, SecondOffset: 251}
	p := NewPositions()
	cases := []struct {
		name        string
		ri          ReplInfo
		pos         ReplPos
		holds, know bool
	}{
		{"same master", a, ReplPos{"aaaa", 150}, true, true},
		{"promoted replica has the write", b, ReplPos{"aaaa", 100}, true, true},
		{"promoted replica lacks the write", b, ReplPos{"aaaa", 101}, false, true},
		{"promoted replica lacks the last of it", b, ReplPos{"aaaa", 150}, false, true},
		{"a write on the new master itself", b, ReplPos{"bbbb", 200}, true, true},
		{"two failovers: B's write, C has it", c, ReplPos{"bbbb", 250}, true, true},
		{"two failovers: B's write, C lacks it", c, ReplPos{"bbbb", 251}, false, true},
		{"two failovers: A's write, B never seen", c, ReplPos{"aaaa", 90}, false, false},
	}
	for _, tc := range cases {
		holds, known := p.Holds(tc.ri, tc.pos)
		if holds != tc.holds || known != tc.know {
			t.Errorf("%s: holds %v known %v, want %v %v", tc.name, holds, known, tc.holds, tc.know)
		}
	}
	// Once B was seen, A's writes are judged through it: C holds A's
	// stream as far as both cuts reach.
	p.Learn(b)
	for _, tc := range []struct {
		pos   ReplPos
		holds bool
	}{{ReplPos{"aaaa", 90}, true}, {ReplPos{"aaaa", 100}, true}, {ReplPos{"aaaa", 120}, false}} {
		holds, known := p.Holds(c, tc.pos)
		if !known || holds != tc.holds {
			t.Errorf("A's write at %d through B to C: holds %v known %v, want %v", tc.pos.Offset, holds, known, tc.holds)
		}
	}
}
