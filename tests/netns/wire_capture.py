#!/usr/bin/env python3
"""Records when each frame from one IPv4 source arrives on an interface, as the kernel saw it.

Usage: wire_capture.py INTERFACE SOURCE_IP OUT_FILE
Run inside the receiving namespace. Writes "seconds bytes" lines (CLOCK_REALTIME receive time
from the kernel, the frame's length with its Ethernet header) for every TCP frame carrying
payload from SOURCE_IP, until SIGTERM or SIGINT; a frame that went through the shaper as one
GSO segment train arrives whole, and the reader splits its length back into frames. The last
line is "# drops N": frames the kernel could not queue for this socket (0, or the times above
have holes). The link tests use it as their reference for what the shaped link really
delivered, independent of the daemons' own timing.
"""
import signal
import socket
import struct
import sys

SO_TIMESTAMPNS = 35  # Linux: the kernel's receive time as a struct timespec
SO_RCVBUFFORCE = 33
SOL_PACKET = 263
PACKET_STATISTICS = 6  # struct tpacket_stats {u32 tp_packets, tp_drops}
PACKET_IGNORE_OUTGOING = 23
ETH_P_ALL = 0x0003
TIMESPEC = struct.Struct("ll")


def main():
    iface, source, out_path = sys.argv[1], socket.inet_aton(sys.argv[2]), sys.argv[3]
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    # Our own side's frames (the model going out every round) must not fill the queue.
    try:
        sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
    except OSError:
        pass  # kernels before 4.20: filtered below instead
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 16 << 20)
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
    sock.bind((iface, 0))
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8)  # reading resets the counters
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    sock.settimeout(0.2)
    ancillary_size = socket.CMSG_SPACE(TIMESPEC.size)
    with open(out_path, "w") as out:
        out.write("ready\n")
        out.flush()
        while not stop:
            try:
                frame, ancillary, _, address = sock.recvmsg(65536, ancillary_size)
            except socket.timeout:
                continue
            if address[2] == socket.PACKET_OUTGOING or len(frame) < 54:
                continue
            if frame[12:14] != b"\x08\x00" or frame[23] != 6 or frame[26:30] != source:
                continue  # not IPv4 TCP from the source
            ihl = (frame[14] & 0x0F) * 4
            total = struct.unpack("!H", frame[16:18])[0]
            tcp_header = (frame[14 + ihl + 12] >> 4) * 4
            if total - ihl - tcp_header <= 0:
                continue  # a bare ack
            for level, kind, data in ancillary:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                    sec, nsec = TIMESPEC.unpack(data[:TIMESPEC.size])
                    out.write(f"{sec + nsec * 1e-9:.9f} {len(frame)}\n")
        _, drops = struct.unpack("II", sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))
        out.write(f"# drops {drops}\n")


if __name__ == "__main__":
    main()
