//go:build linux

package web

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// tcpInfo reads the kernel's view of a stream client's connection: the
// bytes the client has acknowledged so far and the receive window it
// advertises now (how much more its kernel takes before its program
// reads). ok is false when conn is not a TCP socket.
func tcpInfo(conn net.Conn) (acked uint64, wnd uint32, ok bool) {
	sc, isSC := conn.(syscall.Conn)
	if !isSC {
		return 0, 0, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, 0, false
	}
	var info *unix.TCPInfo
	var ierr error
	if err := raw.Control(func(fd uintptr) {
		info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || ierr != nil {
		return 0, 0, false
	}
	return info.Bytes_acked, info.Snd_wnd, true
}
