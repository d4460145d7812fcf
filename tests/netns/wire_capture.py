#!/usr/bin/env python3
"""Records when each frame from one IPv4 source arrives on an interface, as the kernel saw it.

Usage: wire_capture.py INTERFACE SOURCE_IP OUT_FILE
Run inside the receiving namespace. Writes "seconds bytes" lines (CLOCK_REALTIME receive time
from the kernel, whole Ethernet frame length: what tbf charges) for every TCP frame carrying
payload from SOURCE_IP, until SIGTERM or SIGINT. The link tests use it as their reference for
what the shaped link really delivered, independent of the daemons' own timing.
"""
import signal
import socket
import struct
import sys

SO_TIMESTAMPNS = 35  # Linux; struct timespec with the kernel's receive time
ETH_P_ALL = 0x0003


def main():
    iface, source, out_path = sys.argv[1], socket.inet_aton(sys.argv[2]), sys.argv[3]
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.bind((iface, 0))
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    sock.settimeout(0.2)
    with open(out_path, "w") as out:
        out.write("ready\n")
        out.flush()
        while not stop:
            try:
                frame, ancillary, _, (_, _, pkttype, _, _) = sock.recvmsg(65536, 64)
            except socket.timeout:
                continue
            except InterruptedError:
                continue
            if pkttype == socket.PACKET_OUTGOING or len(frame) < 54:
                continue
            if frame[12:14] != b"\x08\x00" or frame[23] != 6 or frame[26:30] != source:
                continue  # not IPv4 TCP from the source
            ihl = (frame[14] & 0x0F) * 4
            total = struct.unpack("!H", frame[16:18])[0]
            tcp_header = (frame[14 + ihl + 12] >> 4) * 4
            if total - ihl - tcp_header <= 0:
                continue  # a bare ack
            stamp = None
            for level, kind, data in ancillary:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                    sec, nsec = struct.unpack("qq", data[:16])
                    stamp = sec + nsec * 1e-9
            if stamp is not None:
                out.write(f"{stamp:.9f} {len(frame)}\n")


if __name__ == "__main__":
    main()
