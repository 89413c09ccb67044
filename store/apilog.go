package store

// The pipeline API's log entries on their way to every node's live
// stream (doc/pipeline-api.md, Logs off Redis): the leader publishes them
// on ChannelAPILog, every node listens.

import "context"

// PublishAPILog publishes one batch of API log entries on ChannelAPILog
// and returns how many subscribers got it.
func (s *Store) PublishAPILog(ctx context.Context, msg string) (int64, error) {
	n, err := s.rdb.Publish(ctx, ChannelAPILog, msg).Result()
	if err != nil {
		return 0, wrap("publish API log entries", err)
	}
	return n, nil
}

// ListenAPILog subscribes to ChannelAPILog and calls onMessage with every
// message until the connection fails or ctx ends, as ListenUpdates.
func (s *Store) ListenAPILog(ctx context.Context, onSubscribed func(), onMessage func(msg string)) (bool, error) {
	return s.listen(ctx, ChannelAPILog, onSubscribed, onMessage)
}
