//go:build !linux

package web

import "net"

// tcpInfo is not available here: the stream is bounded by its queue alone.
func tcpInfo(net.Conn) (acked uint64, wnd uint32, ok bool) { return 0, 0, false }
