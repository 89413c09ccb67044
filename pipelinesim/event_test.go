package pipelinesim

import (
	"errors"
	"testing"
)

// The simulator's lines give every number its unit (before: an API take
// printed "take IDENT 37186", microseconds without saying so).
func TestEventStringUnits(t *testing.T) {
	cases := []struct {
		e    Event
		want string
	}{
		{Event{Kind: EventTake, Ident: "abc", N: 37186}, "take abc in 37.186ms"},
		{Event{Kind: EventTake, Ident: "abc"}, "take abc"},
		{Event{Kind: EventSetting, Ident: "abc", N: 3}, "settings abc (settings age 3)"},
		{Event{Kind: EventLog, Ident: "abc", N: 12}, "log abc entry 12"},
		{Event{Kind: EventDone, Ident: "abc"}, "done abc"},
		{Event{Kind: EventError, Ident: "abc", Err: errors.New("boom")}, "error abc: boom"},
	}
	for _, c := range cases {
		if got := c.e.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.e, got, c.want)
		}
	}
}
