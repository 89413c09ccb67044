// Package storetest runs a test on each Redis backend of redistest with a
// store on it: the set-up most tests of the store and of what sits on it
// start with.
package storetest

import (
	"context"
	"testing"

	"github.com/archiveteam/archivebot-go/internal/redistest"
	"github.com/archiveteam/archivebot-go/store"
)

// Each runs fn as a subtest on each backend (redistest.Each) with a store
// on it, made with opts (a test's clock: store.WithClock), and a
// background context.
func Each(t *testing.T, fn func(t *testing.T, b *redistest.Backend, s *store.Store, ctx context.Context), opts ...store.Option) {
	t.Helper()
	redistest.Each(t, func(t *testing.T, b *redistest.Backend) { fn(t, b, store.New(b.Client, opts...), context.Background()) })
}
